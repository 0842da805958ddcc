"""The policies' names and default thresholds (the descheduler's), apart from the planning itself so that
reading them costs nothing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal

SPREAD_REPAIR: Final = "RemovePodsViolatingTopologySpreadConstraint"
PolicyName = Literal[
    "LowNodeUtilization", "HighNodeUtilization", "RemovePodsViolatingTopologySpreadConstraint"
]
POLICY_NAMES: tuple[PolicyName, ...] = ("LowNodeUtilization", "HighNodeUtilization", SPREAD_REPAIR)
DEFAULT_THRESHOLDS: Mapping[str, float] = {"cpu": 20.0, "memory": 20.0, "pods": 20.0}
DEFAULT_TARGETS: Mapping[str, float] = {"cpu": 50.0, "memory": 50.0, "pods": 50.0}
