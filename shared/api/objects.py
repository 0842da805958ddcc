"""Raw Kubernetes JSON -> the slim event payloads, with msgspec and no client model objects.

Each `Raw*` struct names only the fields the payload needs; msgspec skips the rest of the document while
parsing, which is where the speed comes from (bench/watcher_bench.py measures it against the client's
models).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Generic, Literal, TypeVar

import msgspec

from shared.api import annotations as known
from shared.api import codec, workload_kinds
from shared.api.messages import NodeInfo, PdbInfo, PodInfo, WorkloadInfo, WorkloadRef
from shared.api.meta import ObjectReference
from shared.api.pmj import PodMigrationJob
from shared.api.quantity import format_milli, pod_requests
from shared.api.reservation import Reservation

T = TypeVar("T")

# Annotations the arbitration rules and the executor read (the PodMigrationJob proposal, Koordinator's guide,
# KEP-1397 and Koordinator's code).
ANNOTATIONS_OF_INTEREST = frozenset(
    {
        known.EVICTION_COST,
        known.SOFT_EVICTION,
        known.RESERVATION_ALLOCATED,
        known.EVICT,
        known.REQUEST_EVICT_ONLY,
        known.EVICTION_IN_PROGRESS,
        known.CONFIG_MIRROR,
        known.CONFIG_SOURCE,
        known.POD_DELETION_COST,
        known.PREFER_NO_EVICTION,
        known.DO_NOT_DISRUPT,
        known.SAFE_TO_EVICT,
    }
)
PODHERD_ANNOTATION_PREFIX = "podherd.io/"


class RawOwner(msgspec.Struct):
    apiVersion: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool = False


class RawMeta(msgspec.Struct):
    name: str = ""
    namespace: str | None = None
    uid: str = ""
    resourceVersion: str = ""
    generation: int = 0
    creationTimestamp: datetime | None = None
    deletionTimestamp: datetime | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    ownerReferences: list[RawOwner] | None = None

    def controller(self) -> RawOwner | None:
        for ref in self.ownerReferences or ():
            if ref.controller:
                return ref
        return None


class RawCondition(msgspec.Struct):
    type: str = ""
    status: str = ""
    reason: str = ""


class RawPodStatus(msgspec.Struct):
    phase: str | None = None
    startTime: datetime | None = None
    qosClass: str | None = None
    conditions: list[RawCondition] | None = None


class RawPodSpec(msgspec.Struct):
    nodeName: str | None = None
    schedulerName: str | None = None
    priority: int | None = None
    priorityClassName: str | None = None
    containers: list[dict[str, Any]] = msgspec.field(default_factory=list)
    initContainers: list[dict[str, Any]] | None = None
    overhead: dict[str, str] | None = None
    volumes: list[dict[str, Any]] | None = None


class RawPod(msgspec.Struct):
    metadata: RawMeta = msgspec.field(default_factory=RawMeta)
    spec: RawPodSpec = msgspec.field(default_factory=RawPodSpec)
    status: RawPodStatus = msgspec.field(default_factory=RawPodStatus)


class RawWorkloadSpec(msgspec.Struct):
    replicas: int | None = None


class RawWorkloadStatus(msgspec.Struct):
    replicas: int = 0
    readyReplicas: int = 0
    availableReplicas: int = 0
    updatedReplicas: int = 0


class RawWorkload(msgspec.Struct):
    kind: str = ""
    metadata: RawMeta = msgspec.field(default_factory=RawMeta)
    spec: RawWorkloadSpec = msgspec.field(default_factory=RawWorkloadSpec)
    status: RawWorkloadStatus = msgspec.field(default_factory=RawWorkloadStatus)


class RawSelector(msgspec.Struct):
    matchLabels: dict[str, str] | None = None


class RawPdbSpec(msgspec.Struct):
    selector: RawSelector | None = None
    minAvailable: int | str | None = None
    maxUnavailable: int | str | None = None


class RawPdbStatus(msgspec.Struct):
    currentHealthy: int = 0
    desiredHealthy: int = 0
    disruptionsAllowed: int = 0
    expectedPods: int = 0


class RawPdb(msgspec.Struct):
    metadata: RawMeta = msgspec.field(default_factory=RawMeta)
    spec: RawPdbSpec = msgspec.field(default_factory=RawPdbSpec)
    status: RawPdbStatus = msgspec.field(default_factory=RawPdbStatus)


class RawTaint(msgspec.Struct):
    key: str = ""
    effect: str = ""


class RawNodeSpec(msgspec.Struct):
    unschedulable: bool = False
    taints: list[RawTaint] | None = None


class RawNodeStatus(msgspec.Struct):
    allocatable: dict[str, str] | None = None
    conditions: list[RawCondition] | None = None


class RawNode(msgspec.Struct):
    metadata: RawMeta = msgspec.field(default_factory=RawMeta)
    spec: RawNodeSpec = msgspec.field(default_factory=RawNodeSpec)
    status: RawNodeStatus = msgspec.field(default_factory=RawNodeStatus)


class WatchLine(msgspec.Struct):
    type: Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"]
    object: msgspec.Raw


class ListMeta(msgspec.Struct):
    resourceVersion: str = ""
    # `continue` is a Python keyword
    continue_: str | None = msgspec.field(default=None, name="continue")


class RawList(msgspec.Struct, Generic[T]):
    metadata: ListMeta = msgspec.field(default_factory=ListMeta)
    items: list[T] = msgspec.field(default_factory=list)


class MetaOnly(msgspec.Struct):
    metadata: RawMeta = msgspec.field(default_factory=RawMeta)


# ---------------------------------------------------------------------------------------------------------
# Conversions


def _ref(owner: RawOwner | None, namespace: str | None) -> ObjectReference | None:
    if owner is None:
        return None
    return ObjectReference(
        api_version=owner.apiVersion, kind=owner.kind, name=owner.name, uid=owner.uid, namespace=namespace
    )


class WorkloadResolver:
    """ReplicaSet uid -> the Deployment that controls it, fed by a ReplicaSet watch.

    A pod's workload is its ReplicaSet's controller where there is one (a Deployment, an Argo Rollout);
    otherwise its own controller. Until a ReplicaSet has been seen, Kubernetes' naming rule
    (`<deployment>-<pod-template-hash>`) stands in. Kinds are named as `shared.api.workload_kinds` names them.
    """

    def __init__(self) -> None:
        self.owners: dict[str, WorkloadRef | None] = {}

    def observe(self, event_type: str, rs: RawWorkload) -> None:
        if event_type == "DELETED":
            self.owners.pop(rs.metadata.uid, None)
            return
        parent = rs.metadata.controller()
        namespace = rs.metadata.namespace or ""
        self.owners[rs.metadata.uid] = (
            WorkloadRef(kind=_kind(parent), namespace=namespace, name=parent.name, uid=parent.uid)
            if parent is not None
            else None
        )

    def resolve(self, pod: RawPod) -> WorkloadRef | None:
        owner = pod.metadata.controller()
        namespace = pod.metadata.namespace or ""
        if owner is None:
            return None
        if owner.kind == "ReplicaSet":
            if owner.uid in self.owners:
                parent = self.owners[owner.uid]
                if parent is not None:
                    return parent
            else:
                template_hash = (pod.metadata.labels or {}).get("pod-template-hash")
                if template_hash and owner.name.endswith("-" + template_hash):
                    return WorkloadRef(
                        kind="Deployment", namespace=namespace, name=owner.name[: -len(template_hash) - 1]
                    )
        return WorkloadRef(kind=_kind(owner), namespace=namespace, name=owner.name, uid=owner.uid)


def _kind(owner: RawOwner) -> str:
    return workload_kinds.of_reference(owner.apiVersion, owner.kind)


def pod_info(pod: RawPod, resolver: WorkloadResolver | None = None) -> PodInfo:
    meta, spec, status = pod.metadata, pod.spec, pod.status
    annotations = {
        k: v
        for k, v in (meta.annotations or {}).items()
        if k in ANNOTATIONS_OF_INTEREST or k.startswith(PODHERD_ANNOTATION_PREFIX)
    }
    try:
        requests = pod_requests(
            {
                "containers": spec.containers,
                "initContainers": spec.initContainers or [],
                "overhead": spec.overhead or {},
            }
        )
    except ValueError:
        requests = {}
    requests.pop("pods", None)
    return PodInfo(
        uid=meta.uid,
        namespace=meta.namespace or "",
        name=meta.name,
        node_name=spec.nodeName,
        phase=status.phase,
        ready=any(c.type == "Ready" and c.status == "True" for c in status.conditions or ()),
        deletion_timestamp=meta.deletionTimestamp,
        evicted=any(
            c.type == known.DISRUPTION_TARGET and c.reason == known.EVICTION_BY_EVICTION_API
            for c in status.conditions or ()
        ),
        created_at=meta.creationTimestamp,
        started_at=status.startTime,
        owner=_ref(meta.controller(), meta.namespace),
        workload=(resolver or _NO_RESOLVER).resolve(pod),
        priority=spec.priority,
        priority_class_name=spec.priorityClassName,
        qos_class=status.qosClass,
        scheduler_name=spec.schedulerName,
        requests={k: format_milli(v, k) for k, v in requests.items()},
        labels=dict(meta.labels or {}),
        annotations=annotations,
        volume_kinds=sorted({k for v in spec.volumes or () for k in v if k != "name"}),
        mirror=known.CONFIG_MIRROR in (meta.annotations or {}),
    )


_NO_RESOLVER = WorkloadResolver()


def workload_info(obj: RawWorkload, kind: str) -> WorkloadInfo:
    meta = obj.metadata
    return WorkloadInfo(
        uid=meta.uid,
        kind=kind,
        namespace=meta.namespace or "",
        name=meta.name,
        replicas=obj.spec.replicas if obj.spec.replicas is not None else 1,
        ready_replicas=obj.status.readyReplicas,
        available_replicas=obj.status.availableReplicas,
        updated_replicas=obj.status.updatedReplicas,
        owner=_ref(meta.controller(), meta.namespace),
    )


def pdb_info(obj: RawPdb) -> PdbInfo:
    meta = obj.metadata
    return PdbInfo(
        uid=meta.uid,
        namespace=meta.namespace or "",
        name=meta.name,
        selector=dict((obj.spec.selector.matchLabels if obj.spec.selector else None) or {}),
        min_available=obj.spec.minAvailable,
        max_unavailable=obj.spec.maxUnavailable,
        current_healthy=obj.status.currentHealthy,
        desired_healthy=obj.status.desiredHealthy,
        disruptions_allowed=obj.status.disruptionsAllowed,
        expected_pods=obj.status.expectedPods,
    )


def node_info(obj: RawNode) -> NodeInfo:
    meta = obj.metadata
    ready = next((c.status == "True" for c in obj.status.conditions or () if c.type == "Ready"), True)
    return NodeInfo(
        uid=meta.uid,
        name=meta.name,
        ready=ready,
        unschedulable=obj.spec.unschedulable,
        allocatable=dict(obj.status.allocatable or {}),
        labels=dict(meta.labels or {}),
    )


def strict(raw: bytes, type_: type[T]) -> T:
    """Decode an object Podherd owns the schema of (PMJ, Reservation) strictly; SchemaError if it is bad."""
    return codec.decode(raw, type_)


__all__ = [
    "MetaOnly",
    "PodMigrationJob",
    "RawList",
    "RawNode",
    "RawPdb",
    "RawPod",
    "RawWorkload",
    "Reservation",
    "WatchLine",
    "WorkloadResolver",
    "node_info",
    "pdb_info",
    "pod_info",
    "strict",
    "workload_info",
]
