"""Non-retryable filters: a job whose pod fails one ends Failed, with the rule named in the message.

From Koordinator's guide ("内置限制", the built-in limits), the PodMigrationJob proposal's filter stage, the
descheduler's default evictor checks it inherits, and what Koordinator added since. Each gate can be switched
off through `skipEvictionGates`, except two that never can: a missing pod (Koordinator #3039 let such jobs
pass) and a pod that another active job is already moving (checked atomically by the ledger, see `limits`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import msgspec

from shared.api import annotations as known
from shared.api import eviction_gates as gates
from shared.api.drain import LIFT_BARE_POD, LIFT_LOCAL_STORAGE
from shared.api.eviction_gates import EvictionGate, Kind
from shared.api.intstr import max_migrating, max_unavailable
from shared.api.pmj import REASON_FORBIDDEN_MIGRATE_POD
from shared.api.selectors import matches_label_selector
from shared.config.model import MigrationControllerArgs
from shared.rules.facts import JobFacts, PodInfo, WorkloadFacts

MAX_INT32 = 2**31 - 1
SYSTEM_CRITICAL_PRIORITY = 2_000_000_000
SYSTEM_CRITICAL_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})
EVICTION_COST = known.EVICTION_COST
MIRROR = known.CONFIG_MIRROR
CONFIG_SOURCE = known.CONFIG_SOURCE
PREFER_NO_EVICTION = known.PREFER_NO_EVICTION
DO_NOT_DISRUPT, SAFE_TO_EVICT = known.DO_NOT_DISRUPT, known.SAFE_TO_EVICT
LOCAL_STORAGE_VOLUMES = frozenset({"emptyDir", "hostPath"})


class Rejection(msgspec.Struct, frozen=True):
    rule: str
    reason: str
    message: str


def _forbid(rule: str, message: str) -> Rejection:
    return Rejection(rule, REASON_FORBIDDEN_MIGRATE_POD, f"{rule}: {message}")


@dataclass(slots=True)
class Subject:
    """What a gate looks at: the job, its pod and workload, the configuration, the priority threshold."""

    job: JobFacts
    pod: PodInfo
    workload: WorkloadFacts | None
    args: MigrationControllerArgs
    threshold: int | None


Check = Callable[[Subject], str | None]
_CHECKS: dict[EvictionGate, Check] = {}
_judges = gates.registrar(Kind.FILTER, _CHECKS)  # a filter's check, on its function


def evaluate(
    job: JobFacts,
    pod: PodInfo,
    workload: WorkloadFacts | None,
    *,
    args: MigrationControllerArgs,
    priority_threshold: int | None = None,
) -> Rejection | None:
    """The first filter `pod` fails, or None when the job may go on to the limits.

    `priority_threshold` is `priorityThreshold` resolved to a number (by value, or its PriorityClass's).
    """
    subject = Subject(job, pod, workload, args, priority_threshold)
    annotated = known.EVICT in pod.annotations
    for gate, check in _active_gates(args):
        if annotated and gate in LIFTED_BY_EVICT:
            continue
        message = check(subject)
        if message is not None:
            return _forbid(gate, message)
    return None


_active: list[tuple[MigrationControllerArgs, tuple[tuple[str, Check], ...]]] = []


def _active_gates(args: MigrationControllerArgs) -> tuple[tuple[str, Check], ...]:
    """The gates `skipEvictionGates` leaves on, worked out once per configuration."""
    if not _active or _active[0][0] is not args:
        skip = set(args.skip_eviction_gates)
        _active[:] = [(args, tuple((gate, check) for gate, check in _GATES if gate not in skip))]
    return _active[0][1]


@_judges(gates.EVICTION_COST)
def _eviction_cost(s: Subject) -> str | None:
    cost = s.pod.annotations.get(EVICTION_COST)
    if cost is not None and cost.strip() == str(MAX_INT32):
        return f"the pod is annotated {EVICTION_COST}={MAX_INT32} (never evict)"
    return None


@_judges(gates.SCHEDULER_NAME)
def _scheduler_name(s: Subject) -> str | None:
    pod, schedulers = s.pod, s.args.scheduler_names
    if s.job.mode == "ReservationFirst" and (pod.scheduler_name or "default-scheduler") not in schedulers:
        return (
            f"ReservationFirst needs a scheduler that honours Reservations ({', '.join(schedulers)}); "
            f"the pod uses {pod.scheduler_name or 'default-scheduler'}"
        )
    return None


@_judges(gates.NAMESPACES)
def _namespace(s: Subject) -> str | None:
    namespaces, namespace = s.args.namespaces, s.pod.namespace
    if namespaces and namespaces.include and namespace not in namespaces.include:
        return f"namespace {namespace} is not in namespaces.include"
    if namespaces and namespaces.exclude and namespace in namespaces.exclude:
        return f"namespace {namespace} is in namespaces.exclude"
    return None


@_judges(gates.LABEL_SELECTOR)
def _label_selector(s: Subject) -> str | None:
    selector = s.args.label_selector
    if selector is not None and not matches_label_selector(selector, s.pod.labels):
        return "the pod's labels do not match labelSelector"
    return None


@_judges(gates.PRIORITY_THRESHOLD)
def _priority_threshold(s: Subject) -> str | None:
    """As Koordinator's evictor filter: only where system-critical pods are not evicted anyway, and a pod
    without a priority is below any threshold."""
    if s.args.evict_system_critical_pods or s.pod.priority is None:
        return None
    priority = s.pod.priority
    if s.threshold is not None and priority >= s.threshold:
        return f"pod priority {priority} is at or above priorityThreshold {s.threshold}"
    return None


@_judges(gates.SYSTEM_CRITICAL)
def _system_critical(s: Subject) -> str | None:
    if s.args.evict_system_critical_pods:
        return None
    pod = s.pod
    if (pod.priority or 0) >= SYSTEM_CRITICAL_PRIORITY or pod.priority_class_name in SYSTEM_CRITICAL_CLASSES:
        return "the pod is system-critical (evictSystemCriticalPods is off)"
    return None


@_judges(gates.LOCAL_STORAGE)
def _local_storage(s: Subject) -> str | None:
    kinds = LOCAL_STORAGE_VOLUMES.intersection(s.pod.volume_kinds)
    if LIFT_LOCAL_STORAGE in s.job.lifts and kinds <= {"emptyDir"}:  # --delete-emptydir-data: emptyDir only
        return None
    if kinds and not s.args.evict_local_storage_pods:
        return f"the pod uses local storage ({', '.join(sorted(kinds))}; evictLocalStoragePods is off)"
    return None


@_judges(gates.PVC)
def _pvc(s: Subject) -> str | None:
    if s.args.ignore_pvc_pods and "persistentVolumeClaim" in s.pod.volume_kinds:
        return "the pod has a PersistentVolumeClaim (ignorePvcPods is on)"
    return None


@_judges(gates.BARE_PODS)
def _bare_pod(s: Subject) -> str | None:
    pod, args = s.pod, s.args
    if pod.owner is not None or args.evict_all_bare_pods or LIFT_BARE_POD in s.job.lifts:
        return None
    if pod.phase == "Failed" and args.evict_failed_bare_pods:
        return None
    return "the pod has no controller, nothing would replace it (evictAllBarePods is off)"


@_judges(gates.DAEMON_SET)
def _daemonset(s: Subject) -> str | None:
    if s.pod.owner is not None and s.pod.owner.kind == "DaemonSet":
        return "the pod belongs to a DaemonSet"
    return None


@_judges(gates.MIRROR_POD)
def _mirror(s: Subject) -> str | None:
    return "the pod is a mirror pod" if s.pod.mirror or MIRROR in s.pod.annotations else None


@_judges(gates.STATIC_POD)
def _static(s: Subject) -> str | None:
    source = s.pod.annotations.get(CONFIG_SOURCE)
    if source is not None and source != "api":
        return f"the pod is a static pod (config.source {source})"
    return None


@_judges(gates.NO_EVICTION)
def _no_eviction(s: Subject) -> str | None:
    if s.args.no_eviction_policy == "Mandatory" and PREFER_NO_EVICTION in s.pod.annotations:
        return f"the pod is annotated {PREFER_NO_EVICTION} (noEvictionPolicy is Mandatory)"
    return None


@_judges(gates.DO_NOT_DISRUPT)
def _do_not_disrupt(s: Subject) -> str | None:
    if s.args.autoscaler_protections == "Mandatory" and (asked := autoscaler_protection(s.pod)):
        return f"the pod is annotated {asked} (autoscalerProtections is Mandatory)"
    return None


def autoscaler_protection(pod: PodInfo) -> str | None:
    """The annotation by which the pod asks the autoscalers to leave it be, if it does."""
    if pod.annotations.get(DO_NOT_DISRUPT) == "true":
        return f"{DO_NOT_DISRUPT}=true"
    if pod.annotations.get(SAFE_TO_EVICT) == "false":
        return f"{SAFE_TO_EVICT}=false"
    return None


@_judges(gates.TERMINATING)
def _terminating(s: Subject) -> str | None:
    return "the pod is already terminating" if s.pod.deletion_timestamp is not None else None


@_judges(gates.EXPECTED_REPLICAS)
def _expected_replicas(s: Subject) -> str | None:
    workload, args = s.workload, s.args
    if args.skip_check_expected_replicas or workload is None or s.job.surge:  # a surge keeps every replica
        return None
    replicas = workload.replicas
    limit_migrating = max_migrating(replicas, args.max_migrating_per_workload)
    limit_unavailable = max_unavailable(replicas, args.max_unavailable_per_workload)
    if replicas == 0:
        return (
            f"workload {workload.key} expects no replicas: it is scaled to zero, or its kind is one Podherd "
            "reads no replica count of (not among watcher.workloadKinds, or without a /scale subresource), "
            "which counts as none (skipCheckExpectedReplicas is off)"
        )
    if replicas == 1:
        return f"workload {workload.key} has a single replica"
    if replicas in (limit_migrating, limit_unavailable):
        most = max(limit_migrating, limit_unavailable)
        return (
            f"workload {workload.key} has {replicas} replicas and may lose {most} at once: "
            "a migration could take all of them (skipCheckExpectedReplicas is off)"
        )
    return None


# Judged in the registry's order; a filter of the registry without its check here fails the import.
_GATES = tuple((gate.name, _CHECKS[gate]) for gate in gates.FILTERS)
LIFTED_BY_EVICT = frozenset(gate.name for gate in gates.FILTERS if gate.lifted_by_evict)


def surges(
    job: JobFacts, workload: WorkloadFacts | None, *, pdbs: list[int], args: MigrationControllerArgs
) -> bool:
    """Whether the job moves by Surge: asked for (`podherd.io/strategy`), or chosen by `surge`'s switches (a
    drain's job: always) for a ReservationFirst job of a Deployment with one replica, or with a
    PodDisruptionBudget that allows no disruption now (`pdbs`: their disruptionsAllowed)."""
    if job.surge:
        return True
    if job.mode != "ReservationFirst" or workload is None or not workload.key.startswith("Deployment/"):
        return False
    switches = args.surge
    return ((job.drain or switches.single_replica_deployments) and workload.replicas == 1) or (
        (job.drain or switches.zero_disruption_deployments) and any(allowed <= 0 for allowed in pdbs)
    )
