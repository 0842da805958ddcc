"""The executor's metrics."""

from __future__ import annotations

from prometheus_client import Counter

ACTIONS = Counter("podherd_executor_actions_total", "Executor actions", ["step", "policy", "outcome"])
EVICTIONS = Counter(
    "podherd_evictions_total",
    "Evictions by policy and outcome (done, blocked, background, failed)",
    ["policy", "outcome"],
)
# KEP-1397: evictions answered "Eviction triggered": evacuations requested and left to another component.
POD_EVACUATIONS = Counter("podherd_pod_evacuations", "Pods whose eviction was requested in the background")


def count_eviction(policy: str, outcome: str) -> None:
    ACTIONS.labels("evict", policy, outcome).inc()
    EVICTIONS.labels(policy, outcome).inc()
    if outcome == "background":
        POD_EVACUATIONS.inc()
