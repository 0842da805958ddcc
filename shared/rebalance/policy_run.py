"""A policy by name with its options, run on a plan: what the CLI and the planner service share."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from shared.config.planner import (
    DEFAULT_TARGETS,
    DEFAULT_THRESHOLDS,
    HIGH_NODE_UTILIZATION,
    LOW_NODE_UTILIZATION,
    POLICY_NAMES,
    READS,
    SPREAD_REPAIR,
)
from shared.rebalance import policies
from shared.rebalance.planning import Caps, Planning


@dataclass(frozen=True)
class PolicyOptions:
    policy: str
    thresholds: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_THRESHOLDS))
    target_thresholds: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_TARGETS))
    number_of_nodes: int = 0
    caps: Caps = field(default_factory=Caps)
    recent: str = "30m"  # a pod moved within this long stays


Runner = Callable[[Planning, PolicyOptions], policies.Measure]


def _low(planning: Planning, options: PolicyOptions) -> policies.Measure:
    return policies.low_node_utilization(
        planning,
        thresholds=options.thresholds,
        target_thresholds=options.target_thresholds,
        number_of_nodes=options.number_of_nodes,
    )


def _high(planning: Planning, options: PolicyOptions) -> policies.Measure:
    return policies.high_node_utilization(planning, thresholds=options.thresholds)


def _spread(planning: Planning, _: PolicyOptions) -> policies.Measure:
    return policies.spread_repair(planning)


# Every policy, by the name the descheduler gives it, and how it runs: the one place a policy is added.
RUNNERS: Mapping[str, Runner] = {
    LOW_NODE_UTILIZATION: _low,
    HIGH_NODE_UTILIZATION: _high,
    SPREAD_REPAIR: _spread,
}
assert tuple(RUNNERS) == POLICY_NAMES


def run_policy(planning: Planning, options: PolicyOptions) -> policies.Measure:
    """The policy `options` names, run on `planning`; a name no policy has is refused, never defaulted."""
    runner = RUNNERS.get(options.policy)
    if runner is None:
        raise ValueError(f"no rebalancing policy {options.policy!r}: one of {', '.join(POLICY_NAMES)}")
    return runner(planning, options)


def lines_of(options: PolicyOptions) -> dict[str, Mapping[str, float]]:
    """The thresholds the policy reads, by their names (for a picture)."""
    reads = READS.get(options.policy, frozenset())
    lines: dict[str, Mapping[str, float]] = {}
    if "thresholds" in reads:
        lines["thresholds"] = options.thresholds
    if "target_thresholds" in reads:
        lines["targetThresholds"] = options.target_thresholds
    return lines
