"""The policies' names and default thresholds (the descheduler's), apart from the planning itself so that
reading them costs nothing. They are spelled once, in the planner's configuration."""

from __future__ import annotations

from shared.config.planner import (
    DEFAULT_TARGETS,
    DEFAULT_THRESHOLDS,
    HIGH_NODE_UTILIZATION,
    LOW_NODE_UTILIZATION,
    POLICY_NAMES,
    READS,
    SPREAD_REPAIR,
    PolicyName,
)

__all__ = [
    "DEFAULT_TARGETS",
    "DEFAULT_THRESHOLDS",
    "HIGH_NODE_UTILIZATION",
    "LOW_NODE_UTILIZATION",
    "POLICY_NAMES",
    "READS",
    "SPREAD_REPAIR",
    "PolicyName",
]
