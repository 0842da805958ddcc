"""The planner service's configuration (`planner:`): off unless enabled; the policies it runs, in order, on
an interval, with the descheduler's option names; the per-run caps; how recent a move no plan undoes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Final, Literal

import msgspec

from shared.api.meta import Duration

# The rebalancing policies, by the names the descheduler gives them, the options each reads beside the caps,
# and their default thresholds: kept here, where the configuration checks them (the planning's
# shared.rebalance.policy_run finds each one's runner by its name).
LOW_NODE_UTILIZATION: Final = "LowNodeUtilization"
HIGH_NODE_UTILIZATION: Final = "HighNodeUtilization"
SPREAD_REPAIR: Final = "RemovePodsViolatingTopologySpreadConstraint"
PolicyName = Literal[
    "LowNodeUtilization", "HighNodeUtilization", "RemovePodsViolatingTopologySpreadConstraint"
]  # the type the configuration is read with: the three above, checked by mypy below
POLICY_NAMES: tuple[PolicyName, ...] = (LOW_NODE_UTILIZATION, HIGH_NODE_UTILIZATION, SPREAD_REPAIR)
READS: Mapping[str, frozenset[str]] = {
    LOW_NODE_UTILIZATION: frozenset({"thresholds", "target_thresholds", "number_of_nodes"}),
    HIGH_NODE_UTILIZATION: frozenset({"thresholds"}),
    SPREAD_REPAIR: frozenset(),
}
DEFAULT_THRESHOLDS: Mapping[str, float] = {"cpu": 20.0, "memory": 20.0, "pods": 20.0}
DEFAULT_TARGETS: Mapping[str, float] = {"cpu": 50.0, "memory": 50.0, "pods": 50.0}
Resource = Literal["cpu", "memory", "pods"]
RESOURCES: tuple[Resource, ...] = ("cpu", "memory", "pods")
Percentages = dict[Resource, Annotated[float, msgspec.Meta(ge=0, le=100)]]


def _percentages(defaults: Mapping[str, float]) -> dict[Resource, float]:
    """The policies' defaults, as this section's type."""
    return {resource: defaults[resource] for resource in RESOURCES}


class PlannerPolicy(msgspec.Struct, rename="camel", kw_only=True, forbid_unknown_fields=True):
    name: PolicyName
    thresholds: Percentages = msgspec.field(default_factory=lambda: _percentages(DEFAULT_THRESHOLDS))
    target_thresholds: Percentages = msgspec.field(default_factory=lambda: _percentages(DEFAULT_TARGETS))
    number_of_nodes: Annotated[int, msgspec.Meta(ge=0)] = 0


class PlannerConfig(msgspec.Struct, rename="camel", kw_only=True, forbid_unknown_fields=True):
    """`enabled`: the service plans only when true (it is off by default). Every `interval`, the replica
    holding the planner's lease plans the `policies` in order on one snapshot and sends the first wave of
    the plan as intents, under the identity of `intents.tokenFile`; nothing while a job it asked for is
    still in flight."""

    enabled: bool = False
    interval: Duration = "10m"
    policies: list[PlannerPolicy] = msgspec.field(
        default_factory=lambda: [PlannerPolicy(name="LowNodeUtilization")]
    )
    max_no_of_pods_to_evict_per_node: Annotated[int, msgspec.Meta(ge=1)] | None = None
    max_no_of_pods_to_evict_per_namespace: Annotated[int, msgspec.Meta(ge=1)] | None = None
    max_no_of_pods_to_evict_total: Annotated[int, msgspec.Meta(ge=1)] | None = None
    recent: Duration = "30m"  # a pod moved within this long stays where it is
    requester: Annotated[str, msgspec.Meta(min_length=1, max_length=253)] = "podherd-planner"
    lease_ttl: Duration = msgspec.field(default="15s", name="leaseTTL")
