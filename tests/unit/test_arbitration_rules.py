"""The arbitrator's decision core, table by table: filters, limits (the PodMigrationJob proposal,
Koordinator's guide and KEP-1397), sort order."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from msgspec.structs import replace

from services.arbitrator.candidates import candidate
from services.arbitrator.gather import Loaded
from services.arbitrator.rules import limits, order
from shared.api.messages import PodInfo, WorkloadRef
from shared.api.meta import LabelSelector, LabelSelectorRequirement, ObjectReference
from shared.config.loader import config_from_dict
from shared.config.model import MigrationControllerArgs
from shared.rules import filters
from shared.rules.facts import JobFacts, PdbFacts, WorkloadFacts

JOB = JobFacts(name="j1", uid="job-1", pod_namespace="default", pod_name="web-0", created_at=100.0)
RS = ObjectReference(api_version="apps/v1", kind="ReplicaSet", name="web-5d", uid="rs-1", namespace="default")
POD = PodInfo(
    uid="pod-1",
    namespace="default",
    name="web-0",
    node_name="node-1",
    phase="Running",
    ready=True,
    owner=RS,
    workload=WorkloadRef(kind="Deployment", namespace="default", name="web"),
    priority=0,
    scheduler_name="koord-scheduler",
    labels={"app": "web"},
)
WORKLOAD = WorkloadFacts(key="Deployment/default/web", replicas=6)


def args(**overrides: Any) -> MigrationControllerArgs:
    return config_from_dict({"migrationController": overrides}).migration_controller


def pod(**changes: Any) -> PodInfo:
    return PodInfo(**{**_fields(POD), **changes})


def _fields(p: PodInfo) -> dict[str, Any]:
    return {f: getattr(p, f) for f in p.__struct_fields__}


# ---------------------------------------------------------------------------------------------------------
# Filters


@pytest.mark.parametrize(
    ("gate", "changes", "config"),
    [
        (
            "podherd.io/EvictionCost",
            {"annotations": {"scheduling.koordinator.sh/eviction-cost": "2147483647"}},
            {},
        ),
        ("podherd.io/Terminating", {"deletion_timestamp": datetime(2026, 1, 1, tzinfo=UTC)}, {}),
        ("podherd.io/MirrorPod", {"mirror": True}, {}),
        ("podherd.io/StaticPod", {"annotations": {"kubernetes.io/config.source": "file"}}, {}),
        ("podherd.io/DaemonSet", {"owner": ObjectReference(kind="DaemonSet", name="ds")}, {}),
        ("BarePods", {"owner": None}, {}),
        ("podherd.io/SchedulerName", {"scheduler_name": "default-scheduler"}, {}),
        ("Namespaces", {}, {"namespaces": {"exclude": ["default"]}}),
        ("Namespaces", {}, {"namespaces": {"include": ["prod"]}}),
        ("LabelSelector", {}, {"labelSelector": {"matchLabels": {"app": "api"}}}),
        ("PriorityThreshold", {"priority": 1000}, {"priorityThreshold": {"value": 1000}}),
        ("SystemCritical", {"priority": 2_000_000_000}, {}),
        ("SystemCritical", {"priority_class_name": "system-node-critical"}, {}),
        ("LocalStorage", {"volume_kinds": ["emptyDir"]}, {}),
        ("LocalStorage", {"volume_kinds": ["hostPath"]}, {}),
        ("PVC", {"volume_kinds": ["persistentVolumeClaim"]}, {"ignorePvcPods": True}),
    ],
)
def test_each_filter_forbids_and_its_gate_can_be_skipped(
    gate: str, changes: dict[str, Any], config: dict[str, Any]
) -> None:
    threshold = (config.get("priorityThreshold") or {}).get("value")
    rejection = filters.evaluate(
        JOB, pod(**changes), WORKLOAD, args=args(**config), priority_threshold=threshold
    )
    assert rejection is not None
    assert rejection.rule == gate and rejection.reason == "ForbiddenMigratePod"
    assert rejection.message.startswith(gate + ":")
    skipped = filters.evaluate(
        JOB,
        pod(**changes),
        WORKLOAD,
        args=args(**config, skipEvictionGates=[gate]),
        priority_threshold=threshold,
    )
    assert skipped is None or skipped.rule != gate
    # Koordinator's filters let a pod annotated descheduler.alpha.kubernetes.io/evict through; Podherd's of
    # pods that cannot be moved at all, or ask to be left be, still hold.
    evict = {"descheduler.alpha.kubernetes.io/evict": ""}
    annotated = pod(**{**changes, "annotations": {**changes.get("annotations", {}), **evict}})
    through = filters.evaluate(JOB, annotated, WORKLOAD, args=args(**config), priority_threshold=threshold)
    assert (through is None) is (gate in filters.LIFTED_BY_EVICT), (gate, through)


def test_a_plain_pod_passes() -> None:
    assert filters.evaluate(JOB, POD, WORKLOAD, args=args()) is None


@pytest.mark.parametrize(
    ("changes", "config", "passes"),
    [
        ({"owner": None}, {"evictAllBarePods": True}, True),
        ({"owner": None, "phase": "Failed"}, {"evictFailedBarePods": True}, True),
        ({"owner": None, "phase": "Running"}, {"evictFailedBarePods": True}, False),
        ({"volume_kinds": ["emptyDir"]}, {"evictLocalStoragePods": True}, True),
        ({"volume_kinds": ["persistentVolumeClaim"]}, {}, True),
        ({"priority": 2_000_000_000}, {"evictSystemCriticalPods": True}, True),
        (
            {"scheduler_name": "default-scheduler"},
            {"schedulerNames": ["koord-scheduler", "default-scheduler"]},
            True,
        ),
        ({"annotations": {"scheduling.koordinator.sh/eviction-cost": "100"}}, {}, True),
        ({"annotations": {"kubernetes.io/config.source": "api"}}, {}, True),
        ({"priority": 999}, {"priorityThreshold": {"value": 1000}}, True),
        # Koordinator's evictor filter: the threshold only where system-critical pods are not evicted anyway,
        # a pod without a priority below it, and by value (a name beside it is accepted, not resolved).
        ({"priority": 5000}, {"priorityThreshold": {"value": 1000}, "evictSystemCriticalPods": True}, True),
        ({"priority": None}, {"priorityThreshold": {"value": 1000}}, True),
        ({"priority": 999}, {"priorityThreshold": {"value": 1000, "name": "high"}}, True),
        ({"priority": 1000}, {"priorityThreshold": {"value": 1000, "name": "low"}}, False),
    ],
)
def test_options_that_allow(changes: dict[str, Any], config: dict[str, Any], passes: bool) -> None:
    threshold = (config.get("priorityThreshold") or {}).get("value")
    assert (
        filters.evaluate(JOB, pod(**changes), WORKLOAD, args=args(**config), priority_threshold=threshold)
        is None
    ) is passes


def test_evict_directly_ignores_the_scheduler_name() -> None:
    job = replace(JOB, mode="EvictDirectly")
    assert filters.evaluate(job, pod(scheduler_name="default-scheduler"), WORKLOAD, args=args()) is None


def test_label_selector_expressions() -> None:
    selector = LabelSelector(
        match_expressions=[LabelSelectorRequirement(key="app", operator="In", values=["web"])]
    )
    config = args()
    config.label_selector = selector
    assert filters.evaluate(JOB, POD, WORKLOAD, args=config) is None
    config.label_selector = LabelSelector(match_labels={"app": "db"})
    assert filters.evaluate(JOB, POD, WORKLOAD, args=config) is not None


@pytest.mark.parametrize(
    ("replicas", "config", "forbidden"),
    [
        (1, {}, True),  # a single replica
        (2, {}, False),  # defaults: 1 of 2
        (3, {"maxMigratingPerWorkload": 3}, True),  # the limit equals the replicas
        (4, {"maxUnavailablePerWorkload": "100%"}, True),
        (4, {"maxUnavailablePerWorkload": "100%", "skipCheckExpectedReplicas": True}, False),
        (10, {}, False),
    ],
)
def test_expected_replicas(replicas: int, config: dict[str, Any], forbidden: bool) -> None:
    workload = WorkloadFacts(key="Deployment/default/web", replicas=replicas)
    rejection = filters.evaluate(JOB, POD, workload, args=args(**config))
    assert (rejection is not None and rejection.rule == "ExpectedReplicas") is forbidden


# ---------------------------------------------------------------------------------------------------------
# Limits


WEB = "workload:Deployment/default/web"


def empty_ledger(ready: int = 0) -> limits.LedgerView:
    """No job in flight; `ready` of the workload's pods (pod-0, pod-1, ...) Ready."""
    return limits.LedgerView(
        slots={}, evicting={}, tokens={}, claims={}, ready={WEB: {f"pod-{i}" for i in range(ready)}}
    )


def admit(ledger: limits.LedgerView, p: limits.AdmissionPlan, now: float = 1000.0) -> limits.Outcome:
    """Evaluate, and on admission take what the plan takes (as the ledger script does)."""
    outcome = limits.evaluate(p, ledger, now)
    if outcome.admitted:
        for slot in p.slots:
            ledger.slots.setdefault(slot.key, set()).add(p.job_uid)  # type: ignore[attr-defined]
        for bucket in p.buckets:
            tokens, last = ledger.tokens.get(bucket.key, (float(bucket.burst), now))
            available = min(float(bucket.burst), tokens + (now - last) * bucket.rate)
            ledger.tokens[bucket.key] = (available - 1, now)  # type: ignore[index]
        ledger.claims[p.pod_uid] = p.job_uid  # type: ignore[index]
    return outcome


def job_pod(
    i: int, node: str = "node-1", annotations: dict[str, str] | None = None
) -> tuple[JobFacts, PodInfo]:
    return (
        replace(JOB, name=f"j{i}", uid=f"job-{i}", pod_name=f"web-{i}"),
        pod(uid=f"pod-{i}", name=f"web-{i}", node_name=node, annotations=annotations or {}),
    )


def test_seed_001_three_replicas_admit_one_of_two() -> None:
    workload = WorkloadFacts(key="Deployment/default/web", replicas=3)
    config = args(evictBurst=10, evictQPS=100)
    ledger = empty_ledger(ready=3)
    (j1, p1), (j2, p2) = job_pod(1, "node-1"), job_pod(2, "node-2")
    assert admit(ledger, limits.plan(j1, p1, workload, pdbs=(), args=config)).admitted
    second = admit(ledger, limits.plan(j2, p2, workload, pdbs=(), args=config))
    assert not second.admitted and second.rule == "maxMigratingPerWorkload"
    assert second.message == "deferred: maxMigratingPerWorkload 1/1 on workload Deployment/default/web"


def test_node_limit_and_the_evict_annotation_bypass() -> None:
    config = args(
        evictBurst=10,
        evictQPS=100,
        objectLimiters={"workload": {"duration": "1s", "maxMigrating": 100, "burst": 100}},
    )
    workload = WorkloadFacts(key="Deployment/default/web", replicas=40)
    ledger = empty_ledger(ready=40)
    for i in range(2):
        j, p = job_pod(i)
        assert admit(ledger, limits.plan(j, p, workload, pdbs=(), args=config)).admitted
    j, p = job_pod(3)
    third = admit(ledger, limits.plan(j, p, workload, pdbs=(), args=config))
    assert not third.admitted and third.message == "deferred: maxMigratingPerNode 2/2 on node node-1"
    j, p = job_pod(4, annotations={"descheduler.alpha.kubernetes.io/evict": ""})
    assert admit(
        ledger, limits.plan(j, p, workload, pdbs=(), args=config)
    ).admitted  # Koordinator's guide: the annotation lifts it


def test_eviction_in_progress_counts_as_migrating() -> None:
    config = args(evictBurst=10, evictQPS=100)
    ledger = empty_ledger()
    ledger.evicting["node:node-1"] = {"pod-x", "pod-y"}  # type: ignore[index]
    j, p = job_pod(1)
    outcome = admit(ledger, limits.plan(j, p, None, pdbs=(), args=config))
    assert not outcome.admitted and outcome.rule == "maxMigratingPerNode" and "2/2" in outcome.message


def test_waiting_jobs_count_nowhere() -> None:
    # Koordinator #1150: evaluating a job takes nothing; only admission does.
    config = args(evictBurst=10, evictQPS=100)
    ledger = empty_ledger()
    for i in range(5):
        j, p = job_pod(i)
        limits.evaluate(limits.plan(j, p, None, pdbs=(), args=config), ledger, 1000.0)
    assert not ledger.slots and not ledger.claims


def test_max_unavailable_counts_unavailable_replicas() -> None:
    config = args(evictBurst=10, evictQPS=100, maxMigratingPerWorkload=5)
    workload = WorkloadFacts(key="Deployment/default/web", replicas=8)  # default limit 2
    ledger = empty_ledger(ready=7)  # one replica down
    j, p = job_pod(1)
    assert admit(ledger, limits.plan(j, p, workload, pdbs=(), args=config)).admitted
    j, p = job_pod(2, "node-2")
    outcome = admit(ledger, limits.plan(j, p, workload, pdbs=(), args=config))
    assert not outcome.admitted and outcome.rule == "maxUnavailablePerWorkload"
    assert outcome.message == (
        "deferred: maxUnavailablePerWorkload 2/2 on workload Deployment/default/web (1 more unavailable)"
    )


def _gone(ledger: limits.LedgerView, *pods: str) -> None:
    ledger.ready[WEB].difference_update(pods)


def _ready(ledger: limits.LedgerView, *pods: str) -> None:
    ledger.ready[WEB].update(pods)


def six_replicas() -> tuple[limits.LedgerView, Callable[[int, str], limits.Outcome]]:
    """6 Ready replicas (maxUnavailable 2 by default), and a way to ask for moving pod-i on a node."""
    limiter = {"workload": {"duration": "1s", "maxMigrating": 100, "burst": 100}}
    config = args(evictBurst=10, evictQPS=100, maxMigratingPerWorkload=5, objectLimiters=limiter)
    workload = WorkloadFacts(key="Deployment/default/web", replicas=6)
    ledger = empty_ledger(ready=6)

    def move(i: int, node: str) -> limits.Outcome:
        return admit(ledger, limits.plan(*job_pod(i, node), workload, pdbs=(), args=config))

    return ledger, move


def test_a_job_in_flight_counts_once_by_its_old_pod_or_its_replacement() -> None:
    # 6 replicas: maxUnavailable 2 by default. Job 1's pod goes; its replacement is not Ready yet: one
    # replica is missing and one job is in flight, which is one unavailable replica, not two.
    ledger, move = six_replicas()
    assert move(1, "node-1").admitted
    _gone(ledger, "pod-1")  # evicted; the replacement pod-r1 exists but is not Ready
    assert move(2, "node-2").admitted
    # Now two are in flight: a third waits, with or without its old pod gone.
    third = move(3, "node-3")
    assert not third.admitted and third.message.startswith("deferred: maxUnavailablePerWorkload 2/2")
    _gone(ledger, "pod-2")
    assert not move(3, "node-3").admitted
    # Job 1's replacement is Ready, but job 1 is still in flight (not yet confirmed): it still counts once.
    _ready(ledger, "pod-r1")
    assert not move(3, "node-3").admitted
    # Job 1 ends (its slots released): room for the third.
    for members in ledger.slots.values():
        members.discard("job-1")
    ledger.claims.pop("pod-1")  # type: ignore[attr-defined]
    assert move(3, "node-3").admitted


def test_replicas_down_beyond_the_jobs_count_on_top_of_them() -> None:
    ledger, move = six_replicas()
    assert move(1, "node-1").admitted
    _gone(ledger, "pod-1", "pod-5")  # job 1's pod went, and pod-5 crashed: two replicas really down
    outcome = move(2, "node-2")
    assert not outcome.admitted
    assert outcome.message.endswith("2/2 on workload Deployment/default/web (1 more unavailable)")
    # Moving the crashed pod itself adds nothing: it is unavailable already.
    assert move(5, "node-2").admitted


def test_pdb_and_global_limits() -> None:
    config = args(evictBurst=10, evictQPS=100, maxMigratingGlobally=1)
    ledger = empty_ledger()
    j, p = job_pod(1)
    pdb = PdbFacts(key="default/web", disruptions_allowed=0)
    blocked = admit(ledger, limits.plan(j, p, None, pdbs=[pdb], args=config))
    assert not blocked.admitted and blocked.rule == "PodDisruptionBudget"
    assert admit(
        ledger, limits.plan(j, p, None, pdbs=[replace(pdb, disruptions_allowed=1)], args=config)
    ).admitted
    j2, p2 = job_pod(2, "node-2")
    outcome = admit(ledger, limits.plan(j2, p2, None, pdbs=(), args=config))
    assert not outcome.admitted and outcome.rule == "maxMigratingGlobally"
    # Koordinator's: the pod's evict annotation passes the global limit too (its retryable filters), never
    # a budget.
    j3, p3 = job_pod(3, "node-2", annotations={"descheduler.alpha.kubernetes.io/evict": ""})
    assert admit(ledger, limits.plan(j3, p3, None, pdbs=(), args=config)).admitted
    j4, p4 = job_pod(4, "node-3", annotations={"descheduler.alpha.kubernetes.io/evict": ""})
    budget = admit(ledger, limits.plan(j4, p4, None, pdbs=[replace(pdb, key="default/db")], args=config))
    assert not budget.admitted and budget.rule == "PodDisruptionBudget"


def test_the_jobs_evict_annotation_passes_the_object_limiters_and_the_pods_does_not() -> None:
    """Koordinator's requeueJobIfObjectLimiterFailed skips a job annotated evict; its filters skip a pod so
    annotated, but the object limiters are the controller's, not the filters'."""
    config = args(
        evictBurst=10, evictQPS=100, objectLimiters={"workload": {"duration": "1h", "maxMigrating": 1}}
    )
    workload = WorkloadFacts(key="Deployment/default/web", replicas=6)
    evict = {"descheduler.alpha.kubernetes.io/evict": ""}
    plans = {
        name: [b.rule for b in limits.plan(j, p, workload, pdbs=(), args=config).buckets]
        for name, (j, p) in {
            "plain": job_pod(1),
            "pod annotated": job_pod(2, annotations=evict),
            "job annotated": (replace(job_pod(3)[0], evict=True), job_pod(3)[1]),
        }.items()
    }
    assert plans == {
        "plain": ["evictQPS", "objectLimiters.workload"],
        "pod annotated": ["evictQPS", "objectLimiters.workload"],
        "job annotated": ["evictQPS"],
    }


def test_token_bucket_uses_the_ledger_clock() -> None:
    config = args(evictQPS=2, evictBurst=1, maxMigratingPerNode=0)
    ledger = empty_ledger()
    j1, p1 = job_pod(1)
    j2, p2 = job_pod(2)
    assert admit(ledger, limits.plan(j1, p1, None, pdbs=(), args=config), now=10.0).admitted
    early = admit(ledger, limits.plan(j2, p2, None, pdbs=(), args=config), now=10.2)
    assert not early.admitted and early.rule == "evictQPS" and "next token in 0.30s" in early.message
    assert admit(ledger, limits.plan(j2, p2, None, pdbs=(), args=config), now=10.5).admitted


def test_object_limiter_charged_at_admission() -> None:
    # Koordinator #2074: the workload limiter must really limit. 2 per 10 minutes, burst 2.
    config = args(
        evictBurst=100,
        evictQPS=100,
        maxMigratingPerNode=0,
        maxMigratingPerWorkload=50,
        maxUnavailablePerWorkload=50,
        objectLimiters={"workload": {"duration": "10m", "maxMigrating": 2, "burst": 2}},
    )
    workload = WorkloadFacts(key="Deployment/default/web", replicas=100)
    ledger = empty_ledger(ready=100)
    outcomes = [admit(ledger, limits.plan(*job_pod(i), workload, pdbs=(), args=config)) for i in range(3)]
    assert [o.admitted for o in outcomes] == [True, True, False]
    assert outcomes[2].rule == "objectLimiters.workload"


def test_a_pod_claimed_by_another_job_is_forbidden() -> None:
    config = args(evictBurst=10, evictQPS=100)
    ledger = empty_ledger()
    j1, p = job_pod(1)
    assert admit(ledger, limits.plan(j1, p, None, pdbs=(), args=config)).admitted
    other = replace(j1, name="other", uid="job-other")
    outcome = admit(ledger, limits.plan(other, p, None, pdbs=(), args=config))
    assert outcome.forbidden and outcome.rule == "ActiveJob" and "job-1" in outcome.message
    again = admit(ledger, limits.plan(j1, p, None, pdbs=(), args=config))
    assert again.admitted and again.message == "already admitted"  # a retried decision takes nothing twice


# ---------------------------------------------------------------------------------------------------------
# Order


def key_for(
    job_changes: dict[str, Any] | None = None,
    pod_changes: dict[str, Any] | None = None,
    workload: WorkloadFacts | None = WORKLOAD,
    migrating: int = 0,
    direction: str = "seed",
    config: MigrationControllerArgs | None = None,
) -> order.SortKey:
    subject = pod(**(pod_changes or {}))
    return order.sort_key(
        replace(JOB, **(job_changes or {})),
        subject,
        workload,
        migrating_in_workload=migrating,
        order=direction,
        stays=order.asks_to_stay(subject, config or args()),
    )


@pytest.mark.parametrize(
    ("first", "second"),
    [
        # eviction in progress first
        (
            key_for(
                pod_changes={"annotations": {"descheduler.alpha.kubernetes.io/eviction-in-progress": "x"}}
            ),
            key_for(pod_changes={"labels": {"koordinator.sh/qosClass": "LSE"}}),
        ),
        # QoS: LSE > LSR > LS > BE > none
        (
            key_for(pod_changes={"labels": {"koordinator.sh/qosClass": "LSE"}}),
            key_for(pod_changes={"labels": {"koordinator.sh/qosClass": "LSR"}}),
        ),
        (
            key_for(pod_changes={"labels": {"koordinator.sh/qosClass": "LS"}}),
            key_for(pod_changes={"labels": {"koordinator.sh/qosClass": "BE"}}),
        ),
        (key_for(pod_changes={"labels": {"koordinator.sh/qosClass": "BE"}}), key_for()),
        # higher pod priority, then higher migration priority
        (key_for(pod_changes={"priority": 100}), key_for(pod_changes={"priority": 10})),
        (key_for(job_changes={"migration_priority": 5}), key_for()),
        # fewer failed attempts, fewer past workload migrations, fewer migrating now
        (key_for(), key_for(job_changes={"failed_attempts": 1})),
        (key_for(), key_for(workload=replace(WORKLOAD, past_migrations=3))),
        (key_for(migrating=0), key_for(migrating=1)),
        # lower eviction cost, then older job, then name
        (key_for(pod_changes={"annotations": {"scheduling.koordinator.sh/eviction-cost": "-5"}}), key_for()),
        # then the lower pod-deletion-cost (the pod its ReplicaSet would remove first)
        (
            key_for(pod_changes={"annotations": {"controller.kubernetes.io/pod-deletion-cost": "-10"}}),
            key_for(pod_changes={"annotations": {"controller.kubernetes.io/pod-deletion-cost": "100"}}),
        ),
        (key_for(job_changes={"created_at": 50.0}), key_for()),
        # a pod that prefers to stay goes after every other, however high its QoS (noEvictionPolicy Preferred)
        (
            key_for(pod_changes={"labels": {"koordinator.sh/qosClass": "BE"}}),
            key_for(
                pod_changes={
                    "labels": {"koordinator.sh/qosClass": "LSE"},
                    "annotations": {"descheduler.alpha.kubernetes.io/prefer-no-eviction": ""},
                }
            ),
        ),
        (
            key_for(),
            key_for(
                pod_changes={"annotations": {"karpenter.sh/do-not-disrupt": "true"}},
                config=args(autoscalerProtections="Preferred"),
            ),
        ),
        (key_for(job_changes={"name": "a"}), key_for(job_changes={"name": "b"})),
    ],
)
def test_sort_order(first: order.SortKey, second: order.SortKey) -> None:
    assert first < second
    assert order.lex_key(first) < order.lex_key(second)


def test_cheapest_first_reverses_qos_and_priority() -> None:
    low = key_for(
        pod_changes={"priority": 10, "labels": {"koordinator.sh/qosClass": "BE"}}, direction="cheapestFirst"
    )
    high = key_for(
        pod_changes={"priority": 100, "labels": {"koordinator.sh/qosClass": "LSE"}}, direction="cheapestFirst"
    )
    assert low < high and order.lex_key(low) < order.lex_key(high)


def test_lex_key_handles_extremes() -> None:
    keys = [
        key_for(pod_changes={"priority": p}, job_changes={"migration_priority": m})
        for p in (-(2**31), 0, 2**31 - 1)
        for m in (-(10**12), 0, 10**12)
    ]
    assert sorted(keys) == sorted(keys, key=order.lex_key)


# Koordinator's limit gates: each limit holds a second job back, and skipping its gate (by Koordinator's
# name) lets it through, as `filterMaxMigrating*` of its arbitrator are switched off.
OPEN_LIMITS = {
    "evictBurst": 10,
    "evictQPS": 100,
    "maxMigratingPerNode": 50,
    "maxMigratingPerNamespace": 50,
    "maxMigratingPerWorkload": 10,
    "maxUnavailablePerWorkload": 10,
    # Not a gate in Koordinator.
    "objectLimiters": {"workload": {"duration": "1s", "maxMigrating": 1000, "burst": 1000}},
}


@pytest.mark.parametrize(
    ("gate", "limit", "rule"),
    [
        ("MaxMigratingGlobally", {"maxMigratingGlobally": 1}, "maxMigratingGlobally"),
        ("MaxMigratingPerNode", {"maxMigratingPerNode": 1}, "maxMigratingPerNode"),
        ("MaxMigratingPerNamespace", {"maxMigratingPerNamespace": 1}, "maxMigratingPerNamespace"),
        ("MaxMigratingPerWorkload", {"maxMigratingPerWorkload": 1}, "maxMigratingPerWorkload"),
        ("MaxUnavailablePerWorkload", {"maxUnavailablePerWorkload": 1}, "maxUnavailablePerWorkload"),
    ],
)
def test_each_limit_holds_and_its_koordinator_gate_lifts_it(
    gate: str, limit: dict[str, Any], rule: str
) -> None:
    workload = WorkloadFacts(key="Deployment/default/web", replicas=40)

    def second_job(**skips: Any) -> limits.Outcome:
        config = args(**{**OPEN_LIMITS, **limit, **skips})
        ledger = empty_ledger(ready=40)
        assert admit(ledger, limits.plan(*job_pod(0), workload, pdbs=(), args=config)).admitted
        return admit(ledger, limits.plan(*job_pod(1), workload, pdbs=(), args=config))

    held = second_job()
    assert not held.admitted and held.rule == rule, held
    assert second_job(skipEvictionGates=[gate]).admitted


# What people ask the descheduler and the autoscalers for, honoured as the descheduler's DefaultEvictor does
@pytest.mark.parametrize(
    ("annotations", "config", "gate"),
    [
        (
            {"descheduler.alpha.kubernetes.io/prefer-no-eviction": ""},
            {"noEvictionPolicy": "Mandatory"},
            "NoEviction",
        ),
        ({"karpenter.sh/do-not-disrupt": "true"}, {}, "DoNotDisrupt"),  # Mandatory unless configured
        ({"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}, {}, "DoNotDisrupt"),
    ],
)
def test_a_pod_that_asks_to_stay_is_not_moved_where_that_is_mandatory(
    annotations: dict[str, str], config: dict[str, Any], gate: str
) -> None:
    refused = filters.evaluate(JOB, pod(annotations=annotations), WORKLOAD, args=args(**config))
    assert refused is not None and refused.rule == f"podherd.io/{gate}", refused
    preferred = {**config, "noEvictionPolicy": "Preferred", "autoscalerProtections": "Preferred"}
    assert filters.evaluate(JOB, pod(annotations=annotations), WORKLOAD, args=args(**preferred)) is None
    skipped = args(**config, skipEvictionGates=[f"podherd.io/{gate}"])
    assert filters.evaluate(JOB, pod(annotations=annotations), WORKLOAD, args=skipped) is None


@pytest.mark.parametrize(
    ("annotations", "passes"),
    [
        ({"karpenter.sh/do-not-disrupt": "false"}, True),
        ({"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}, True),
    ],
)
def test_the_autoscalers_annotations_count_by_their_value(annotations: dict[str, str], passes: bool) -> None:
    assert (filters.evaluate(JOB, pod(annotations=annotations), WORKLOAD, args=args()) is None) == passes


def test_a_pod_younger_than_min_pod_age_waits_until_it_is_old_enough() -> None:
    from services.arbitrator.candidates import too_young

    now = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
    config = args(minPodAge="5m")
    young = too_young(pod(started_at=now - timedelta(seconds=60)), config, now)
    assert young is not None
    seconds, rule, message = young
    assert (seconds, rule) == (240.0, "podherd.io/MinPodAge")
    assert message == "waiting for the pod to be 5m old (minPodAge; started 2026-11-26T11:59:00Z)"
    assert too_young(pod(started_at=now - timedelta(minutes=5)), config, now) is None
    assert too_young(pod(started_at=None), config, now) is not None  # not started: younger than any age
    assert too_young(pod(started_at=None), args(), now) is None  # no minPodAge: no wait
    skipped = args(minPodAge="5m", skipEvictionGates=["podherd.io/MinPodAge"])
    assert too_young(pod(started_at=None), skipped, now) is None


@pytest.mark.parametrize(
    ("config", "annotations", "rule"),
    [
        ({"skipCheckExpectedReplicas": True}, {}, "maxMigratingPerWorkload"),
        (
            {"skipCheckExpectedReplicas": True, "skipEvictionGates": ["MaxMigratingPerWorkload"]},
            {},
            "maxUnavailablePerWorkload",
        ),
        ({"skipCheckExpectedReplicas": True}, {"descheduler.alpha.kubernetes.io/evict": "true"}, None),
    ],
)
def test_a_workload_limit_of_zero_ends_the_job_at_once_naming_what_lifts_it(
    config: dict[str, Any], annotations: dict[str, str], rule: str | None
) -> None:
    """A workload that expects no replicas (a Job's, or one scaled to zero) makes its limits 0: waiting
    would never open them, so the job is refused now, not held until its ttl."""
    loaded = Loaded(
        facts=JOB,
        pod=pod(annotations=annotations),
        workload=WorkloadFacts(key="Job.batch/default/work", replicas=0),
        pdbs=[],
    )
    made = candidate("job-1", loaded, args(**config))
    if rule is None:
        assert made.reject is None and made.slots == ()
        return
    assert made.reject is not None and made.slots == ()
    assert made.reject[0] == rule
    assert made.reject[2].startswith(
        f"{rule} is 0 on workload Job.batch/default/work, which expects no replicas"
    )


# Koordinator v1.8.0's TestFilterPodWithMaxEvictionCost (migration/util/util_test.go).
@pytest.mark.parametrize(
    ("cost", "passes"),
    [
        pytest.param(0, True, id="empty cost"),
        pytest.param(-100, True, id="negative cost"),
        pytest.param(100, True, id="higher cost"),
        pytest.param(2**31 - 1, False, id="max cost"),
    ],
)
def test_filter_pod_with_max_eviction_cost(cost: int, passes: bool) -> None:
    annotated = pod(annotations={"scheduling.koordinator.sh/eviction-cost": str(cost)})
    rejection = filters.evaluate(JOB, annotated, WORKLOAD, args=args())
    assert (rejection is None) is passes
