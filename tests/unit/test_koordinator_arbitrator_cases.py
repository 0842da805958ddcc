"""Koordinator v1.8.0's arbitrator filter tests (`migration/arbitrator/filter_test.go`), ported case by case
(each case id is the Go case's name) to Podherd's pure rules: the admission plan and its reference
evaluation (`limits.plan` / `limits.evaluate`, which the ledger's script is tested to agree with) and the
filters (`filters.evaluate`). `tests/koordinator_cases.py` says where every Go case went.

The Go tests ask whether a pod passes one limit while N pods migrate (jobs past arbitration), on the same
node, namespace or workload or another one, or the pod itself is the one migrating ("same Pod"). Podherd
reads "same Pod" as the job that moves it asking again: it holds its slots already and is not counted
against itself (a second job for that pod is refused by the claim on the pod instead:
TestFilterExistingMigrationJob's case).
"""

from __future__ import annotations

from typing import Any

import pytest
from msgspec.structs import replace

from services.arbitrator.rules import limits
from shared.api.messages import PodInfo, WorkloadRef
from shared.rules import filters
from shared.rules.facts import JobFacts, WorkloadFacts
from tests.unit.test_arbitration_rules import JOB, admit, args, pod

ROOMY = {"maxMigratingGlobally": 1000, "maxMigratingPerNode": 1000, "maxMigratingPerNamespace": 1000}
FAST = {
    "evictQPS": 1000,
    "evictBurst": 1000,
    "objectLimiters": {"workload": {"duration": "1s", "maxMigrating": 1000, "burst": 1000}},
}


def member(i: int, *, node: str = "test-node", namespace: str = "default", workload: str = "web") -> PodInfo:
    ref = WorkloadRef(kind="Deployment", namespace=namespace, name=workload)
    return pod(uid=f"pod-{i}", name=f"pod-{i}", node_name=node, namespace=namespace, workload=ref)


def job_of(p: PodInfo) -> JobFacts:
    return replace(JOB, name=f"job-{p.name}", uid=f"job-{p.uid}", pod_namespace=p.namespace, pod_name=p.name)


def passes(
    migrating: list[PodInfo],
    subject: PodInfo,
    config: dict[str, Any],
    *,
    replicas: dict[str, int] | None = None,
    unavailable: int = 0,
) -> bool:
    """Whether `subject`'s job is admitted under `config` while `migrating` pods' jobs hold their slots.
    `replicas`: each workload's (the pods named here among them, all Ready); `unavailable`: how many of
    web's others are not Ready."""
    counts = replicas or {}

    def workload(p: PodInfo) -> WorkloadFacts | None:
        name = p.workload.name if p.workload else ""
        return (
            WorkloadFacts(key=f"Deployment/{p.namespace}/{name}", replicas=counts[name])
            if name in counts
            else None
        )

    ledger = limits.LedgerView(slots={}, evicting={}, tokens={}, claims={}, ready={})
    for name, count in counts.items():
        named = {p.uid for p in [*migrating, subject] if p.workload and p.workload.name == name}
        down = unavailable if name == "web" else 0
        filler = {f"{name}-ready-{i}" for i in range(count - len(named) - down)}
        ledger.ready[f"workload:Deployment/default/{name}"] = named | filler  # type: ignore[index]
    setup = args(**FAST, **ROOMY, maxMigratingPerWorkload="100%", maxUnavailablePerWorkload="100%")
    for p in migrating:
        assert admit(ledger, limits.plan(job_of(p), p, workload(p), pdbs=(), args=setup)).admitted
    plan = limits.plan(job_of(subject), subject, workload(subject), pdbs=(), args=args(**FAST, **config))
    return limits.evaluate(plan, ledger, 1000.0).admitted


def others(count: int, **where: str) -> list[PodInfo]:
    return [member(i, **where) for i in range(1, count + 1)]


@pytest.mark.parametrize(
    ("limit", "migrating", "same_pod", "want"),
    [
        pytest.param(0, 0, False, True, id="maxMigratingGlobally=0"),
        pytest.param(1, 0, False, True, id="maxMigratingGlobally=1 no migrating Pods"),
        pytest.param(1, 1, True, True, id="maxMigratingGlobally=1 one migrating same Pod"),
        pytest.param(1, 1, False, False, id="maxMigrating=1 one migrating Pod with diff Pod"),
    ],
)
def test_filter_max_migrating_globally(limit: int, migrating: int, same_pod: bool, want: bool) -> None:
    pods = others(migrating)
    subject = pods[0] if same_pod and pods else member(0)
    config = {"maxMigratingGlobally": limit, "maxMigratingPerNode": 0}
    assert passes(pods, subject, config) is want


def test_filter_max_migrating_globally_skip_gate() -> None:
    config = {
        "maxMigratingGlobally": 1,
        "maxMigratingPerNode": 0,
        "skipEvictionGates": ["MaxMigratingGlobally"],
    }
    assert passes(others(1), member(0), config)


def per_place(per: str) -> list[Any]:
    """TestFilterMaxMigratingPerNode's and TestFilterMaxMigratingPerNamespace's cases (`per`: Node,
    Namespace): (limit, migrating, same Pod, same place, want)."""
    cases = [
        (0, 0, False, True, True, "maxMigrating=0"),
        (1, 0, False, True, True, "maxMigrating=1 no migrating Pods"),
        (1, 1, True, True, True, f"maxMigrating=1 one migrating Pod with same Pod and {per}"),
        (1, 1, False, True, False, f"maxMigrating=1 one migrating Pod with diff Pod and same {per}"),
        (1, 1, False, False, True, f"maxMigrating=1 one migrating Pod with diff Pod and {per}"),
        (2, 2, True, True, True, f"maxMigrating=2 two migrating Pod with same Pod and {per}"),
        (2, 2, False, False, True, f"maxMigrating=2 two migrating Pod with diff Pod and {per}"),
        (2, 2, False, True, False, f"maxMigrating=2 two migrating Pod with diff Pod and same {per}"),
    ]
    return [pytest.param(*case[:5], id=case[5]) for case in cases]


def per_place_passes(per: str, limit: int, migrating: int, *, same_pod: bool, same_place: bool) -> bool:
    where = "node" if per == "Node" else "namespace"
    pods = others(migrating, **({} if same_place else {where: "elsewhere"}))
    subject = pods[0] if same_pod and pods else member(0)
    return passes(pods, subject, {"maxMigratingPerNode": 0, f"maxMigratingPer{per}": limit})


@pytest.mark.parametrize(("limit", "migrating", "same_pod", "same_place", "want"), per_place("Node"))
def test_filter_max_migrating_per_node(
    limit: int, migrating: int, same_pod: bool, same_place: bool, want: bool
) -> None:
    assert per_place_passes("Node", limit, migrating, same_pod=same_pod, same_place=same_place) is want


@pytest.mark.parametrize(("limit", "migrating", "same_pod", "same_place", "want"), per_place("Namespace"))
def test_filter_max_migrating_per_namespace(
    limit: int, migrating: int, same_pod: bool, same_place: bool, want: bool
) -> None:
    assert per_place_passes("Namespace", limit, migrating, same_pod=same_pod, same_place=same_place) is want


@pytest.mark.parametrize("per", ["Node", "Namespace"])
def test_filter_max_migrating_per_node_and_namespace_skip_gate(per: str) -> None:
    config = {
        "maxMigratingPerNode": 0,
        f"maxMigratingPer{per}": 1,
        "skipEvictionGates": [f"MaxMigratingPer{per}"],
    }
    assert passes(others(1), member(0), config)


@pytest.mark.parametrize(
    ("limit", "migrating", "same_pod", "same_workload", "want"),
    [
        pytest.param(1, 0, False, False, True, id="totalReplicas=10 and maxMigrating=1 no migrating Pod"),
        pytest.param(
            1,
            1,
            True,
            True,
            True,
            id="totalReplicas=10 and maxMigrating=1 one migrating Pod with same Pod and Workload",
        ),
        pytest.param(
            1,
            1,
            False,
            True,
            False,
            id="totalReplicas=10 and maxMigrating=1 one migrating Pod with diff Pod and same Workload",
        ),
        pytest.param(
            1,
            1,
            False,
            False,
            True,
            id="totalReplicas=10 and maxMigrating=1 one migrating Pod with diff Pod and diff Workload",
        ),
        pytest.param(
            2,
            2,
            True,
            True,
            True,
            id="totalReplicas=10 and maxMigrating=2 two migrating Pod with same Pod and Workload",
        ),
        pytest.param(
            2,
            2,
            False,
            True,
            False,
            id="totalReplicas=10 and maxMigrating=2 two migrating Pod with diff Pod and same Workload",
        ),
        pytest.param(
            2,
            2,
            False,
            False,
            True,
            id="totalReplicas=10 and maxMigrating=2 two migrating Pod with diff Pod and diff Workload",
        ),
    ],
)
def test_filter_max_migrating_per_workload(
    limit: int, migrating: int, same_pod: bool, same_workload: bool, want: bool
) -> None:
    pods = others(migrating, **({} if same_workload else {"workload": "other"}))
    subject = pods[0] if same_pod and pods else member(0)
    # maxUnavailablePerWorkload unset: 2 of 10, as in the Go test.
    config = {"maxMigratingPerNode": 0, "maxMigratingPerWorkload": limit}
    assert passes(pods, subject, config, replicas={"web": 10, "other": 10}) is want


@pytest.mark.parametrize(
    ("limit", "unavailable", "migrating", "same_workload", "want"),
    [
        pytest.param(
            1,
            0,
            0,
            True,
            True,
            id="totalReplicas=10 and maxUnavailable=1 no migrating Pod and no unavailable Pod",
        ),
        pytest.param(
            1,
            1,
            0,
            True,
            False,
            id="totalReplicas=10 and maxUnavailable=1 one unavailable Pod with same Workload",
        ),
        pytest.param(
            1,
            0,
            1,
            True,
            False,
            id="totalReplicas=10 and maxUnavailable=1 one migrating Pod with same Workload",
        ),
        # The Go case leaves numMigratingPods at 0 despite its name.
        pytest.param(
            1,
            1,
            0,
            True,
            False,
            id="totalReplicas=10 and maxUnavailable=1 one unavailable Pod and one migrating Pod with "
            "same Workload",
        ),
        pytest.param(
            2,
            0,
            0,
            True,
            True,
            id="totalReplicas=10 and maxUnavailable=2 no migrating Pod and no unavailable Pod",
        ),
        pytest.param(
            2,
            1,
            0,
            True,
            True,
            id="totalReplicas=10 and maxUnavailable=2 one unavailable Pod with same Workload",
        ),
        pytest.param(
            2,
            0,
            1,
            True,
            True,
            id="totalReplicas=10 and maxUnavailable=2 one migrating Pod with same Workload",
        ),
        pytest.param(
            2,
            1,
            1,
            True,
            False,
            id="totalReplicas=10 and maxUnavailable=2 one unavailable Pod and one migrating Pod with "
            "same Workload",
        ),
        pytest.param(
            2,
            1,
            1,
            False,
            True,
            id="totalReplicas=10 and maxUnavailable=2 one unavailable Pod and one migrating Pod with "
            "diff Workload",
        ),
    ],
)
def test_filter_max_unavailable_per_workload(
    limit: int, unavailable: int, migrating: int, same_workload: bool, want: bool
) -> None:
    pods = others(migrating, **({} if same_workload else {"workload": "other"}))
    config = {"maxMigratingPerNode": 0, "maxUnavailablePerWorkload": limit, "maxMigratingPerWorkload": 5}
    assert passes(pods, member(0), config, replicas={"web": 10, "other": 10}, unavailable=unavailable) is want


def test_filter_max_migrating_and_unavailable_per_workload_skip_gates() -> None:
    gates = ["MaxMigratingPerWorkload", "MaxUnavailablePerWorkload"]
    config = {"maxMigratingPerNode": 0, "maxMigratingPerWorkload": 1, "maxUnavailablePerWorkload": 1}
    assert not passes(others(1), member(0), config, replicas={"web": 10})
    assert passes(others(1), member(0), {**config, "skipEvictionGates": gates}, replicas={"web": 10})


@pytest.mark.parametrize(
    ("replicas", "limit", "want"),
    [
        pytest.param(1, 1, False, id="totalReplicas=1 and maxUnavailable=1"),
        pytest.param(100, 100, False, id="totalReplicas=100 and maxUnavailable=100"),
        pytest.param(100, 10, True, id="totalReplicas=100 and maxUnavailable=10"),
    ],
)
def test_filter_expected_replicas(replicas: int, limit: int, want: bool) -> None:
    config = args(maxUnavailablePerWorkload=limit)
    workload = WorkloadFacts(key="Deployment/default/web", replicas=replicas)
    rejection = filters.evaluate(JOB, member(0), workload, args=config)
    assert (rejection is None) is want
    if rejection is not None:
        assert rejection.rule == "ExpectedReplicas"
    skipped = args(maxUnavailablePerWorkload=limit, skipEvictionGates=["ExpectedReplicas"])
    assert filters.evaluate(JOB, member(0), workload, args=skipped) is None


def test_filter_existing_migration_job() -> None:
    # A second job for a pod another job is moving is refused, and not again and again: it is forbidden.
    setup = args(**FAST)
    ledger = limits.LedgerView(slots={}, evicting={}, tokens={}, claims={}, ready={})
    first = member(0)
    assert admit(ledger, limits.plan(job_of(first), first, None, pdbs=(), args=setup)).admitted
    second = replace(job_of(first), name="second", uid="job-second")
    outcome = limits.evaluate(limits.plan(second, first, None, pdbs=(), args=setup), ledger, 1000.0)
    assert outcome.forbidden and outcome.rule == "ActiveJob"


# controller_test.go's object limiter cases: one pod of the workload (or namespace) was evicted `after`
# seconds before the job asks. Go's `want` is "requeued"; here it is "admitted", its opposite. A limiter
# without `burst` bursts to 1 (Koordinator's GetLimiterBurst); a duration of 0 turns it off.
WORKLOAD_LIMITER = {"duration": "1s", "maxMigrating": 10}  # a token every 100 ms
NAMESPACE_LIMITER = {"duration": "1s", "maxMigrating": 5}  # a token every 200 ms
OFF = {"duration": "0s"}


@pytest.mark.parametrize(
    ("limiters", "after", "same_workload", "admitted"),
    [
        pytest.param({"workload": WORKLOAD_LIMITER}, 0.1, True, True, id="less than workload limiter"),
        pytest.param({"workload": WORKLOAD_LIMITER}, 0.01, True, False, id="exceeded workload limiter"),
        pytest.param({"workload": WORKLOAD_LIMITER}, 0.01, False, True, id="other workload"),
        pytest.param({"workload": OFF}, 0.01, True, True, id="disable workloadObjectLimiters"),
        # Unset: Koordinator's default, 5m with maxMigrating from maxMigratingPerWorkload (10 of 100).
        pytest.param(None, 0.01, True, False, id="default workload limiter"),
        pytest.param(
            {"workload": {**WORKLOAD_LIMITER, "burst": 2}}, 0.01, True, True, id="workload limiter with burst"
        ),
    ],
)
def test_requeue_job_if_object_limiter_failed(
    limiters: dict[str, Any] | None, after: float, same_workload: bool, admitted: bool
) -> None:
    config: dict[str, Any] = {"evictQPS": 1000, "evictBurst": 1000, **ROOMY}
    if limiters is not None:
        config["objectLimiters"] = limiters
    evicted = member(1, **({} if same_workload else {"workload": "other"}))
    assert limited(config, after, evicted=evicted) is admitted


@pytest.mark.parametrize(
    ("namespace", "after", "same_namespace", "admitted"),
    [
        pytest.param(NAMESPACE_LIMITER, 0.1, True, False, id="less than workload but more than namespace"),
        pytest.param(NAMESPACE_LIMITER, 0.2, True, True, id="less than both"),
        pytest.param(OFF, 0.1, True, True, id="disable namespaceObjectLimiters"),
        pytest.param(OFF, 0.01, True, False, id="disable namespaceObjectLimiters and exceed workload"),
        pytest.param(NAMESPACE_LIMITER, 0.1, False, True, id="other namespace"),
    ],
)
def test_requeue_job_if_object_limiter_failed_with_namespace(
    namespace: dict[str, Any], after: float, same_namespace: bool, admitted: bool
) -> None:
    limiters = {"workload": WORKLOAD_LIMITER, "namespace": namespace}
    config = {"evictQPS": 1000, "evictBurst": 1000, **ROOMY, "objectLimiters": limiters}
    evicted = member(1, **({} if same_namespace else {"namespace": "elsewhere"}))
    assert limited(config, after, evicted=evicted) is admitted


def limited(config: dict[str, Any], after: float, *, evicted: PodInfo) -> bool:
    """Whether a job of web's pod is admitted `after` seconds after `evicted`'s job was (100 replicas each;
    the limiters alone: the per-workload slots are skipped)."""
    ledger = limits.LedgerView(slots={}, evicting={}, tokens={}, claims={}, ready={})
    gates = ["MaxMigratingPerWorkload", "MaxUnavailablePerWorkload"]
    settings = args(**config, skipEvictionGates=gates)

    def workload(p: PodInfo) -> WorkloadFacts | None:
        return (
            WorkloadFacts(key=f"Deployment/{p.namespace}/{p.workload.name}", replicas=100)
            if p.workload
            else None
        )

    first = limits.plan(job_of(evicted), evicted, workload(evicted), pdbs=(), args=settings)
    assert admit(ledger, first, now=1000.0).admitted
    subject = member(0)
    then = limits.plan(job_of(subject), subject, workload(subject), pdbs=(), args=settings)
    return limits.evaluate(then, ledger, 1000.0 + after).admitted
