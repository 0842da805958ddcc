"""Whether the gate makes a job for an eviction (pure): a pod no job could move gets none, judged by the
arbitrator's own filters with the arbitrator's surge switches."""

from __future__ import annotations

import pytest

from services.gate.movable import let_through, refused, why_not
from shared.api.annotations import EVICTION_COST
from shared.api.messages import PodInfo, WorkloadRef
from shared.api.meta import ObjectReference
from shared.config.model import MigrationControllerArgs, Namespaces, SurgeArgs
from shared.rules.facts import WorkloadFacts

ARGS = MigrationControllerArgs(scheduler_names=["koord-scheduler"])
EXCLUDED = Namespaces(exclude=["shop"])


def pod(kind: str | None = "Deployment", **changes: object) -> PodInfo:
    owner = ObjectReference(kind="ReplicaSet", namespace="shop", name="web-abc") if kind else None
    workload = WorkloadRef(kind=kind, namespace="shop", name="web") if kind else None
    fields: dict[str, object] = {
        "uid": "u1",
        "namespace": "shop",
        "name": "web-abc-1",
        "scheduler_name": "koord-scheduler",
        "owner": owner,
        "workload": workload,
        **changes,
    }
    return PodInfo(**fields)  # type: ignore[arg-type]


def replicas(count: int, kind: str = "Deployment") -> WorkloadFacts:
    return WorkloadFacts(key=f"{kind}/shop/web", replicas=count)


def rule(found: object) -> str | None:
    return getattr(found, "rule", None)


def test_a_pod_of_a_workload_that_can_spare_it_may_be_moved() -> None:
    assert why_not(pod(), replicas(3), args=ARGS, mode="ReservationFirst", budgets=[]) is None


@pytest.mark.parametrize("kind", ["Deployment", "StatefulSet"])
def test_a_single_replica_is_never_moved_unless_a_surge_would_move_it(kind: str) -> None:
    single = replicas(1, kind)
    found = why_not(pod(kind), single, args=ARGS, mode="ReservationFirst", budgets=[])
    assert rule(found) == "ExpectedReplicas"
    surging = MigrationControllerArgs(
        scheduler_names=["koord-scheduler"], surge=SurgeArgs(single_replica_deployments=True)
    )
    found = why_not(pod(kind), single, args=surging, mode="ReservationFirst", budgets=[])
    # A surge scales a Deployment up by one; a StatefulSet's pod keeps its name and cannot be doubled.
    assert rule(found) == (None if kind == "Deployment" else "ExpectedReplicas")
    # Evicted directly there is no surge: the single replica stays unmovable.
    assert (
        rule(why_not(pod(kind), single, args=surging, mode="EvictDirectly", budgets=[])) == "ExpectedReplicas"
    )


def test_a_deployment_whose_budget_allows_no_disruption_moves_by_surge_only_when_switched_on() -> None:
    zero = MigrationControllerArgs(
        scheduler_names=["koord-scheduler"], surge=SurgeArgs(zero_disruption_deployments=True)
    )
    assert why_not(pod(), replicas(2), args=zero, mode="ReservationFirst", budgets=[0]) is None


@pytest.mark.parametrize(
    ("changes", "args", "expected"),
    [
        ({"annotations": {EVICTION_COST: "2147483647"}}, ARGS,
         "podherd.io/EvictionCost"),
        ({"annotations": {"karpenter.sh/do-not-disrupt": "true"}}, ARGS, "podherd.io/DoNotDisrupt"),
        ({"owner": None, "workload": None}, ARGS, "BarePods"),
        ({}, MigrationControllerArgs(scheduler_names=["koord-scheduler"], namespaces=EXCLUDED), "Namespaces"),
        ({"scheduler_name": "default-scheduler"}, ARGS, "podherd.io/SchedulerName"),
    ],
)  # fmt: skip
def test_each_rule_a_job_would_fail_at_once_is_found_before_the_job(
    changes: dict[str, object], args: MigrationControllerArgs, expected: str
) -> None:
    subject = pod(**changes)  # type: ignore[arg-type]
    assert rule(why_not(subject, replicas(3), args=args, mode="ReservationFirst", budgets=[])) == expected


def test_the_answers_name_the_pod_the_rule_and_what_lifts_it() -> None:
    found = why_not(pod(), replicas(1), args=ARGS, mode="ReservationFirst", budgets=[])
    assert found is not None
    warning = let_through(pod(), found)
    assert warning.startswith("Podherd will not move pod shop/web-abc-1 (ExpectedReplicas: workload ")
    assert "evicted as without Podherd, under its PodDisruptionBudgets" in warning
    refusal = refused(pod(), found)
    assert "skipEvictionGates: [ExpectedReplicas]" in refusal and "interceptor.unmovable: allow" in refusal
