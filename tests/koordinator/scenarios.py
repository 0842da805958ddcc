"""The corpus the two controllers are compared on: each a cluster (a scenario document, scoped to a namespace
and nodes of its own), the MigrationControllerArgs both run with over Koordinator's defaults, and the jobs
made for it. Where Podherd differs on purpose, the scenario names the compatibility table's row that says
so; any other difference fails the check."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from shared.api.intstr import max_migrating
from tests.conformance.engines import cluster

TTL = "20s"  # short, so that jobs which can only wait end within the run
# Rows of the compatibility table more than one scenario names
COUNTED = "how long a job counts against `maxMigratingPerNode` and the per-workload limits"
SECOND_JOB = "a second job for a pod another job is moving"
STATEFULSET = "a StatefulSet pod, whose replacement comes back under its name"
DRY_RUN = "`dryRun`"
LIMITERS = "where the eviction rate (`evictQPS`) and the object limiters are counted"


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


def ceiling(scenario: Scenario, kind: str) -> int | None:
    """The most jobs the scenario's args let migrate at once per `kind` (node, namespace, workload), as
    Koordinator's defaults and rules make it; None where nothing bounds it."""
    args = scenario.args
    if kind == "node":
        return int(args.get("maxMigratingPerNode", 2))
    if kind == "namespace":
        return args.get("maxMigratingPerNamespace")
    replicas = max(int(w.get("replicas", 1)) for w in scenario.document.get("workloads") or [{}])
    return max_migrating(replicas, args.get("maxMigratingPerWorkload"))


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


def _bare(**pod: Any) -> dict[str, Any]:
    """Two nodes, a Deployment of two beside, and a pod of no workload named `lonely`."""
    document = cluster(nodes=2, web=2, cpu="500m")
    document["pods"] = [{"name": "lonely", "requests": {"cpu": "500m", "memory": "1Gi"}, **pod}]
    return document


def _two_workloads() -> dict[str, Any]:
    document = cluster(nodes=3, web=4, cpu="250m")
    document["workloads"].append({**document["workloads"][0], "name": "api"})
    return document


def _prioritised(value: int) -> dict[str, Any]:
    return cluster(nodes=3, web=3, cpu="500m", priority=value)


def _with(document: dict[str, Any], **workload: Any) -> dict[str, Any]:
    document["workloads"][0].update(workload)
    return document


def _three() -> dict[str, Any]:
    """Three nodes and a Deployment of three: room for any one replacement."""
    return cluster(nodes=3, web=3, cpu="500m")


MOVED = (Ask("a", spec={"ttl": "2m"}),)  # one job, with time to move
WAITS = (Ask("a", spec={"ttl": TTL}),)  # one job, ended by its short ttl if it can only wait


def _no_room() -> dict[str, Any]:
    """One node, full: a replacement fits nowhere."""
    return cluster(nodes=1, web=2, node_cpu=2, cpu="1")


# A workload limiter of one per minute and a namespace limiter of two, the limits themselves above them.
OBJECT_LIMITERS = {
    "objectLimiters": {
        "workload": {"duration": "1m", "maxMigrating": 1},
        "namespace": {"duration": "1m", "maxMigrating": 2},
    },
    "maxMigratingPerWorkload": 2,
    "maxUnavailablePerWorkload": 2,
}
# One migration at a time per namespace and per workload, the workload limiter off so that the limits
# themselves are what holds the second job.
ONE_EACH = {
    "maxMigratingPerNamespace": 1,
    "maxMigratingPerWorkload": 1,
    "maxUnavailablePerWorkload": 1,
    "objectLimiters": {"workload": {"duration": "0s"}},
}


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("reservation-first", _three(), MOVED),
    Scenario(
        "evict-directly",
        _three(),
        (Ask("a", spec={"mode": "EvictDirectly", "ttl": "2m"}),),
    ),
    Scenario(
        "no-room-until-the-ttl",
        _no_room(),
        WAITS,
    ),
    Scenario(
        "a-budget-allowing-nothing",
        _budget(_three(), minAvailable=3),
        WAITS,
        args={"maxUnavailablePerWorkload": 3, "maxMigratingPerWorkload": 3},
    ),
    Scenario(
        "a-missing-pod", cluster(nodes=2, web=1, cpu="500m"), (Ask("a", pod="gone", spec={"ttl": TTL}),)
    ),
    Scenario(
        "a-statefulset-pod-comes-back-with-its-name",
        _statefulset(),
        MOVED,
        differs={"a": STATEFULSET},
    ),
    Scenario(
        "delete-policy",
        _three(),
        MOVED,
        args={"evictionPolicy": "Delete"},
    ),
    Scenario(
        "a-single-replica-is-not-moved",
        cluster(nodes=3, web=1, cpu="500m"),
        WAITS,
    ),
    Scenario(
        "the-evict-annotation-moves-a-single-replica",
        _annotated(**{"descheduler.alpha.kubernetes.io/evict": "true"}),
        MOVED,
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
        differs={"concurrency": COUNTED},
    ),
    Scenario(
        "soft-eviction-nobody-carries-out",
        _three(),
        WAITS,
        args={"evictionPolicy": "SoftEviction"},
    ),
    Scenario(
        "a-paused-job",
        _three(),
        (Ask("a", spec={"ttl": TTL, "paused": True}),),
        differs={"a": "`spec.paused`"},
    ),
    Scenario(
        "dry-run",
        _three(),
        MOVED,
        args={"dryRun": True},
        differs={"a": DRY_RUN},
    ),
    Scenario(
        "a-named-reservation-that-does-not-exist",
        _three(),
        (Ask("a", spec={"ttl": TTL, "reservationOptions": {"reservationRef": {"name": "nowhere"}}}),),
    ),
    # Pods Koordinator will not move, and pods it moves only when told
    Scenario(
        "two-jobs-for-one-pod",
        _three(),
        (Ask("a", spec={"ttl": "2m"}), Ask("b", spec={"ttl": TTL})),
        differs={"a": SECOND_JOB, "b": SECOND_JOB, "concurrency": SECOND_JOB},
    ),
    Scenario("a-bare-pod", _bare(node="node-1"), (Ask("a", pod="lonely", spec={"ttl": TTL}),)),
    Scenario(
        "a-bare-pod-with-the-evict-annotation",
        _bare(node="node-1", annotations={"descheduler.alpha.kubernetes.io/evict": "true"}),
        (Ask("a", pod="lonely", spec={"ttl": TTL}),),
        differs={"a": "`descheduler.alpha.kubernetes.io/evict` on the pod"},
    ),
    Scenario(
        "a-bare-pod-evicted-directly",
        _bare(node="node-1"),
        (Ask("a", pod="lonely", spec={"mode": "EvictDirectly", "ttl": TTL}),),
    ),
    Scenario(
        "an-eviction-cost-that-forbids-eviction",
        _annotated(**{"scheduling.koordinator.sh/eviction-cost": "2147483647"}),
        WAITS,
    ),
    Scenario(
        "the-evict-annotation-false-on-a-single-replica",
        _annotated(**{"descheduler.alpha.kubernetes.io/evict": "false"}),
        WAITS,
    ),
    Scenario(
        "a-pod-with-local-storage",
        _with(_three(), volumes=[{"name": "scratch", "emptyDir": {}}]),
        MOVED,
    ),
    Scenario(
        "a-single-replica-evicted-directly",
        cluster(nodes=3, web=1, cpu="500m"),
        (Ask("a", spec={"mode": "EvictDirectly", "ttl": TTL}),),
    ),
    # Room, time and budgets
    Scenario(
        "evict-directly-with-no-room",
        _no_room(),
        (Ask("a", spec={"mode": "EvictDirectly", "ttl": TTL}),),
    ),
    Scenario(
        "a-ttl-too-short-for-the-move",
        _three(),
        (Ask("a", spec={"ttl": "1s"}),),
        differs={"a": "a job whose ttl ends before its first step"},
    ),
    Scenario(
        "a-budget-allowing-one",
        _budget(_three(), maxUnavailable=1),
        MOVED,
    ),
    Scenario(
        "a-job-with-delete-options",
        _three(),
        (Ask("a", spec={"ttl": "2m", "deleteOptions": {"gracePeriodSeconds": 0}}),),
    ),
    Scenario(
        "a-statefulset-pod-evicted-directly",
        _statefulset(),
        (Ask("a", spec={"mode": "EvictDirectly", "ttl": "2m"}),),
        differs={"a": STATEFULSET},
    ),
    Scenario(
        "two-jobs-of-a-small-workload-one-at-a-time",
        _three(),
        (Ask("a", index=0, spec={"ttl": "2m"}), Ask("b", index=1, spec={"ttl": "2m"})),
        differs={
            "a": LIMITERS,
            "b": LIMITERS,
            "concurrency": COUNTED,
        },
    ),
    Scenario(
        "three-jobs-on-one-node-under-the-default-limits",
        _on_one_node(4),
        (
            Ask("a", index=0, spec={"ttl": "2m"}),
            Ask("b", index=1, spec={"ttl": "2m"}),
            Ask("c", index=2, spec={"ttl": TTL}),
        ),
        differs={
            "a": LIMITERS,
            "b": LIMITERS,
            "c": LIMITERS,
            "concurrency": COUNTED,
        },
    ),
    # The other policies and dry run, evicting directly
    Scenario(
        "delete-policy-evicting-directly",
        _three(),
        (Ask("a", spec={"mode": "EvictDirectly", "ttl": "2m"}),),
        args={"evictionPolicy": "Delete"},
    ),
    Scenario(
        "soft-eviction-evicting-directly",
        _three(),
        (Ask("a", spec={"mode": "EvictDirectly", "ttl": TTL}),),
        args={"evictionPolicy": "SoftEviction"},
    ),
    Scenario(
        "dry-run-evicting-directly",
        _three(),
        (Ask("a", spec={"mode": "EvictDirectly", "ttl": "2m"}),),
        args={"dryRun": True},
        differs={"a": DRY_RUN},
    ),
    # Which pods the args let move
    Scenario(
        "namespace-excluded",
        _three(),
        WAITS,
        args={"namespaces": {"exclude": ["namespace-excluded"]}, "priorityThreshold": {"value": 100}},
    ),
    Scenario(
        "a-priority-at-the-threshold",
        _prioritised(1000),
        WAITS,
        args={"namespaces": {"exclude": ["namespace-excluded"]}, "priorityThreshold": {"value": 100}},
    ),
    Scenario(
        "a-priority-below-the-threshold",
        _prioritised(10),
        MOVED,
        args={"namespaces": {"exclude": ["namespace-excluded"]}, "priorityThreshold": {"value": 100}},
    ),
    # Limits of every kind
    Scenario(
        "one-per-namespace",
        _two_workloads(),
        (Ask("a", spec={"ttl": "2m"}), Ask("b", app="api", spec={"ttl": "2m"})),
        args=ONE_EACH,
    ),
    Scenario(
        "one-per-workload",
        cluster(nodes=3, web=4, cpu="250m"),
        (Ask("a", index=0, spec={"ttl": "2m"}), Ask("b", index=1, spec={"ttl": "2m"})),
        args=ONE_EACH,
    ),
    Scenario(
        "one-globally",
        _two_workloads(),
        (Ask("a", spec={"ttl": "2m"}), Ask("b", app="api", spec={"ttl": "2m"})),
        args={"maxMigratingGlobally": 1},
    ),
    Scenario(
        "a-workload-object-limiter",
        cluster(nodes=3, web=4, cpu="250m"),
        (Ask("a", index=0, spec={"ttl": "2m"}), Ask("b", index=1, spec={"ttl": TTL})),
        args=OBJECT_LIMITERS,
        differs={"b": LIMITERS},
    ),
    Scenario(
        "a-namespace-object-limiter",
        _two_workloads(),
        (
            Ask("a", spec={"ttl": "2m"}),
            Ask("b", app="api", spec={"ttl": "2m"}),
            Ask("c", app="api", index=1, spec={"ttl": TTL}),
        ),
        args=OBJECT_LIMITERS,
        differs={
            "a": LIMITERS,
            "b": LIMITERS,
            "c": LIMITERS,
        },
    ),
    Scenario(
        "as-many-migrating-as-replicas",
        cluster(nodes=3, web=2, cpu="500m"),
        WAITS,
        args={"maxMigratingPerWorkload": 2, "maxUnavailablePerWorkload": 2},
    ),
    Scenario(
        "as-many-migrating-as-replicas-unchecked",
        cluster(nodes=3, web=2, cpu="500m"),
        MOVED,
        args={
            "maxMigratingPerWorkload": 2,
            "maxUnavailablePerWorkload": 2,
            "skipCheckExpectedReplicas": True,
        },
    ),
    # Defaults the args change
    Scenario(
        "the-default-mode-evicts-directly",
        _three(),
        (Ask("a"),),
        args={"defaultJobMode": "EvictDirectly", "defaultJobTTL": "15s", "evictQPS": 0.2, "evictBurst": 1},
    ),
    Scenario(
        "the-default-ttl-ends-a-wait",
        _no_room(),
        (Ask("a", spec={"mode": "ReservationFirst"}),),
        args={"defaultJobMode": "EvictDirectly", "defaultJobTTL": "15s", "evictQPS": 0.2, "evictBurst": 1},
        differs={"a": "`spec.ttl` left out (a job a user made)"},
    ),
    Scenario(
        "a-slow-eviction-rate",
        _two_workloads(),
        (Ask("a", spec={"ttl": "2m"}), Ask("b", app="api", spec={"ttl": "2m"})),
        args={"defaultJobMode": "EvictDirectly", "defaultJobTTL": "15s", "evictQPS": 0.2, "evictBurst": 1},
    ),
)
