"""A policy by name with its options, run on a plan: what the CLI and the planner service share."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from shared.rebalance import policies
from shared.rebalance.names import DEFAULT_TARGETS, DEFAULT_THRESHOLDS
from shared.rebalance.planning import Caps, Planning


@dataclass(frozen=True)
class PolicyOptions:
    policy: str
    thresholds: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_THRESHOLDS))
    target_thresholds: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_TARGETS))
    number_of_nodes: int = 0
    caps: Caps = field(default_factory=Caps)
    recent: str = "30m"  # a pod moved within this long stays


def run_policy(planning: Planning, options: PolicyOptions) -> policies.Measure:
    if options.policy == "LowNodeUtilization":
        return policies.low_node_utilization(
            planning,
            thresholds=options.thresholds,
            target_thresholds=options.target_thresholds,
            number_of_nodes=options.number_of_nodes,
        )
    if options.policy == "HighNodeUtilization":
        return policies.high_node_utilization(planning, thresholds=options.thresholds)
    return policies.spread_repair(planning)


def lines_of(options: PolicyOptions) -> dict[str, Mapping[str, float]]:
    """The thresholds the policy reads, by their names (for a picture)."""
    lines: dict[str, Mapping[str, float]] = {}
    if options.policy in ("LowNodeUtilization", "HighNodeUtilization"):
        lines["thresholds"] = options.thresholds
    if options.policy == "LowNodeUtilization":
        lines["targetThresholds"] = options.target_thresholds
    return lines
