"""The policies' names and default thresholds (the descheduler's), apart from the planning itself so that
reading them costs nothing. They are spelled once, in the planner's configuration."""

from __future__ import annotations

from shared.config.planner import (
    DEFAULT_TARGETS,
    DEFAULT_THRESHOLDS,
    POLICY_NAMES,
    SPREAD_REPAIR,
    PolicyName,
)

__all__ = ["DEFAULT_TARGETS", "DEFAULT_THRESHOLDS", "POLICY_NAMES", "SPREAD_REPAIR", "PolicyName"]
