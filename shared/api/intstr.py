"""`intstr.IntOrString` arithmetic and the workload limits of the PodMigrationJob proposal.

`GetMaxUnavailable` / `GetMaxMigrating` (the PodMigrationJob proposal, "Workload Max Migrating/Unavailable
Replicas"): with no configured value, more than 10 replicas allow 10%, 4..10 replicas allow 2, fewer allow 1;
percentages are resolved against the replica count and rounded down, as Koordinator v1.8.0's
`GetMaxUnavailable` calls `intstr.GetScaledValueFromIntOrPercent(..., roundUp=false)` (the proposal said up:
the code decides, and down never allows more disruption than configured). A set value that comes to 0 is 1;
the result is capped at the replica count.
"""

from __future__ import annotations

import functools
import math
from typing import TypeAlias

IntOrString: TypeAlias = int | str
PERCENT_PATTERN = r"^[0-9]+(\.[0-9]+)?%$"


def validate_int_or_percent(value: IntOrString) -> None:
    """Raise ValueError when `value` is neither a non-negative int nor a percentage such as '10%'."""
    if isinstance(value, bool):
        raise ValueError(f"expected an integer or a percentage, got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"must be >= 0, got {value}")
        return
    if isinstance(value, str) and value.endswith("%"):
        try:
            pct = float(value[:-1])
        except ValueError:
            pass
        else:
            if pct >= 0:
                return
    raise ValueError(f"expected an integer or a percentage such as '10%', got {value!r}")


@functools.lru_cache(maxsize=4096)
def scaled_value(value: IntOrString, total: int, round_up: bool) -> int:
    """Resolve an int or a percentage of `total`, rounding up or down as `intstr` does."""
    validate_int_or_percent(value)
    if isinstance(value, int):
        return value
    fraction = float(value[:-1]) * total / 100.0
    # intstr computes with integers; guard against float noise such as 10% of 30 = 3.0000000000000004
    fraction = round(fraction, 9)
    return math.ceil(fraction) if round_up else math.floor(fraction)


def default_workload_limit(replicas: int) -> IntOrString:
    """The PodMigrationJob proposal's default when no limit is configured: >10 replicas -> 10%, 4..10 -> 2,
    else 1."""
    if replicas > 10:
        return "10%"
    if 4 <= replicas <= 10:
        return 2
    return 1


@functools.lru_cache(maxsize=4096)  # the same few (replicas, setting) pairs, for every job of a workload
def max_unavailable(replicas: int, configured: IntOrString | None) -> int:
    """`GetMaxUnavailable` as Koordinator v1.8.0 computes it: a value that is set and scales to 0 (`0`,
    `"0%"`) is 1; only an unset one takes the default (1 up to 3 replicas, 2 for 4-10, 10% above); the result
    is capped at the replica count, so `"150%"` or `7` of 6 replicas is 6 (which the expected-replicas rule
    refuses). Percentages round down (80% of 6 is 4), as Koordinator's code does. Koordinator's guide read a 0
    as the default: the code decides."""
    if configured is None:
        scaled = scaled_value(default_workload_limit(replicas), replicas, round_up=False)
    else:
        scaled = scaled_value(configured, replicas, round_up=False) or 1
    return min(scaled, replicas)


def max_migrating(replicas: int, configured: IntOrString | None) -> int:
    """`GetMaxMigrating` of the PodMigrationJob proposal: the same rule as `max_unavailable`."""
    return max_unavailable(replicas, configured)
