"""The corpus the two controllers are compared on: each a cluster (a scenario document, scoped to a namespace
and nodes of its own), the MigrationControllerArgs both run with over Koordinator's defaults, and the jobs
made for it. Where Podherd differs on purpose, the scenario names the compatibility table's row that says
so; any other difference fails the check."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tests.conformance.engines import cluster

TTL = "20s"  # short, so that jobs which can only wait end within the run


@dataclass(frozen=True)
class Ask:
    """A job for pod number `index` (by name) of workload `app`, or for the pod named `pod`."""

    name: str
    app: str = "web"
    index: int = 0
    pod: str | None = None
    spec: dict[str, Any] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Scenario:
    name: str
    document: dict[str, Any]
    jobs: tuple[Ask, ...]
    args: dict[str, Any] = field(default_factory=dict)
    # job name -> the compatibility table's row (its `what`) that says why Podherd ends it otherwise
    differs: dict[str, str] = field(default_factory=dict)


def _budget(document: dict[str, Any], **pdb: Any) -> dict[str, Any]:
    document["workloads"][0]["pdb"] = pdb
    return document


def _on_one_node(replicas: int) -> dict[str, Any]:
    document = cluster(nodes=3, web=replicas, cpu="500m")
    document["workloads"][0]["placement"] = ["node-1"] * replicas
    return document


def _annotated(**annotations: str) -> dict[str, Any]:
    document = cluster(nodes=3, web=1, cpu="500m")
    document["workloads"][0]["annotations"] = annotations
    return document


def _statefulset() -> dict[str, Any]:
    document = cluster(nodes=3, web=2, cpu="500m")
    document["workloads"][0]["kind"] = "StatefulSet"
    return document


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("reservation-first", cluster(nodes=3, web=3, cpu="500m"), (Ask("a", spec={"ttl": "2m"}),)),
    Scenario(
        "evict-directly",
        cluster(nodes=3, web=3, cpu="500m"),
        (Ask("a", spec={"mode": "EvictDirectly", "ttl": "2m"}),),
    ),
    Scenario(
        "no-room-until-the-ttl",
        cluster(nodes=1, web=2, node_cpu=2, cpu="1"),
        (Ask("a", spec={"ttl": TTL}),),
    ),
    Scenario(
        "a-budget-allowing-nothing",
        _budget(cluster(nodes=3, web=3, cpu="500m"), minAvailable=3),
        (Ask("a", spec={"ttl": TTL}),),
        args={"maxUnavailablePerWorkload": 3, "maxMigratingPerWorkload": 3},
    ),
    Scenario(
        "a-missing-pod", cluster(nodes=2, web=1, cpu="500m"), (Ask("a", pod="gone", spec={"ttl": TTL}),)
    ),
    Scenario(
        "a-statefulset-pod-comes-back-with-its-name",
        _statefulset(),
        (Ask("a", spec={"ttl": "2m"}),),
        differs={"a": "a StatefulSet pod, whose replacement comes back under its name"},
    ),
    Scenario(
        "delete-policy",
        cluster(nodes=3, web=3, cpu="500m"),
        (Ask("a", spec={"ttl": "2m"}),),
        args={"evictionPolicy": "Delete"},
    ),
    Scenario(
        "a-single-replica-is-not-moved",
        cluster(nodes=3, web=1, cpu="500m"),
        (Ask("a", spec={"ttl": TTL}),),
    ),
    Scenario(
        "the-evict-annotation-moves-a-single-replica",
        _annotated(**{"descheduler.alpha.kubernetes.io/evict": "true"}),
        (Ask("a", spec={"ttl": "2m"}),),
    ),
    Scenario(
        "two-jobs-on-one-node-one-at-a-time",
        _on_one_node(4),
        (Ask("a", index=0, spec={"ttl": "2m"}), Ask("b", index=1, spec={"ttl": "2m"})),
        args={
            "maxMigratingPerNode": 1,
            "maxMigratingPerWorkload": 2,
            "maxUnavailablePerWorkload": 2,
            "objectLimiters": {"workload": {"duration": "0s"}},
        },
    ),
    Scenario(
        "soft-eviction-nobody-carries-out",
        cluster(nodes=3, web=3, cpu="500m"),
        (Ask("a", spec={"ttl": TTL}),),
        args={"evictionPolicy": "SoftEviction"},
    ),
    Scenario(
        "a-paused-job",
        cluster(nodes=3, web=3, cpu="500m"),
        (Ask("a", spec={"ttl": TTL, "paused": True}),),
        differs={"a": "`spec.paused`"},
    ),
    Scenario(
        "dry-run",
        cluster(nodes=3, web=3, cpu="500m"),
        (Ask("a", spec={"ttl": "2m"}),),
        args={"dryRun": True},
        differs={"a": "`dryRun`"},
    ),
    Scenario(
        "a-named-reservation-that-does-not-exist",
        cluster(nodes=3, web=3, cpu="500m"),
        (Ask("a", spec={"ttl": TTL, "reservationOptions": {"reservationRef": {"name": "nowhere"}}}),),
    ),
)
