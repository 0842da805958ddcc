"""The kinds the watcher follows: where each lives in the API, and how its raw JSON becomes a payload."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from shared.api.codec import SchemaError
from shared.api.messages import AccountInfo, NodeInfo, PdbInfo, PodInfo, WatchedKind, WorkloadInfo
from shared.api.meta import ObjectMeta
from shared.api.objects import (
    MetaOnly,
    RawMeta,
    RawNode,
    RawPdb,
    RawPod,
    RawWorkload,
    WorkloadResolver,
    node_info,
    pdb_info,
    pod_info,
    strict,
    workload_info,
)
from shared.api.pmj import PodMigrationJob
from shared.api.pmj_read import decode_pmj
from shared.api.reservation import Reservation
from shared.api.workload_kinds import WorkloadKind
from shared.config.model import WatcherConfig
from shared.nats.bus import WORKLOADS, token


@dataclass(frozen=True)
class Decoded:
    meta: RawMeta
    payload: Any
    error: str | None = None


@dataclass(frozen=True)
class KindSpec:
    kind: WatchedKind | str  # a configured workload kind: as `shared.api.workload_kinds` names it
    plural: str  # the subject token (its checkpoint's, lease's and metrics' name too)
    group: str
    version: str
    namespaced: bool
    decode: Callable[[bytes, WorkloadResolver], Decoded]
    minimal: Callable[[str, str, str], Any]  # (uid, namespace, name) -> payload for a vanished object
    resource: str = ""  # the API resource, where it is not `plural`
    scaled: bool = False  # its replica count is read through its /scale subresource

    def path(self, namespace: str | None = None) -> str:
        base = f"/api/{self.version}" if not self.group else f"/apis/{self.group}/{self.version}"
        resource = self.resource or self.plural
        if namespace and self.namespaced:
            return f"{base}/namespaces/{namespace}/{resource}"
        return f"{base}/{resource}"


def workload_spec(kind: WorkloadKind) -> KindSpec:
    """A configured workload kind, published on `<prefix>.events.workloads.<kind>.<namespace>.<name>`."""
    return KindSpec(
        kind.name,
        f"{WORKLOADS}.{token(kind.name)}",
        kind.group,
        kind.version,
        True,
        _workload(kind.name),
        _minimal_workload(kind.name),
        resource=kind.resource,
        scaled=True,
    )


def watched(config: WatcherConfig) -> list[KindSpec]:
    """What the watcher follows: the kinds it is told to, and every configured workload kind."""
    return [KINDS[name] for name in config.kinds] + [workload_spec(k) for k in config.workload_kinds]


def _pod(raw: bytes, resolver: WorkloadResolver) -> Decoded:
    pod = msgspec.json.decode(raw, type=RawPod)
    return Decoded(pod.metadata, pod_info(pod, resolver))


def _workload(kind: str) -> Callable[[bytes, WorkloadResolver], Decoded]:
    def decode(raw: bytes, resolver: WorkloadResolver) -> Decoded:
        obj = msgspec.json.decode(raw, type=RawWorkload)
        return Decoded(obj.metadata, workload_info(obj, kind))

    return decode


def _pdb(raw: bytes, _: WorkloadResolver) -> Decoded:
    obj = msgspec.json.decode(raw, type=RawPdb)
    return Decoded(obj.metadata, pdb_info(obj))


def _node(raw: bytes, _: WorkloadResolver) -> Decoded:
    obj = msgspec.json.decode(raw, type=RawNode)
    return Decoded(obj.metadata, node_info(obj))


def _strict(
    type_: type[Any], minimal: Callable[[str, str, str], Any]
) -> Callable[[bytes, WorkloadResolver], Decoded]:
    def decode(raw: bytes, _: WorkloadResolver) -> Decoded:
        meta = msgspec.json.decode(raw, type=MetaOnly).metadata
        try:
            return Decoded(meta, strict(raw, type_))
        except SchemaError as exc:
            return Decoded(meta, minimal(meta.uid, meta.namespace or "", meta.name), str(exc))

    return decode


def _account(raw: bytes, _: WorkloadResolver) -> Decoded:
    meta = msgspec.json.decode(raw, type=MetaOnly).metadata
    return Decoded(meta, _minimal_account(meta.uid, meta.namespace or "", meta.name))


def _minimal_account(uid: str, namespace: str, name: str) -> AccountInfo:
    return AccountInfo(uid=uid, namespace=namespace, name=name)


def _pmj(raw: bytes, _: WorkloadResolver) -> Decoded:
    """A job that cannot be read whole goes on as what can be read of it, with why in the author's terms:
    the arbitrator records that, and the tracker ends the job InvalidSpec saying the same."""
    meta = msgspec.json.decode(raw, type=MetaOnly).metadata
    job, unreadable = decode_pmj(msgspec.json.decode(raw))
    return Decoded(meta, job, unreadable) if unreadable else Decoded(meta, job)


def _minimal_pmj(uid: str, namespace: str, name: str) -> PodMigrationJob:
    return PodMigrationJob(metadata=ObjectMeta(name=name, uid=uid))


def _minimal_reservation(uid: str, namespace: str, name: str) -> Reservation:
    return Reservation(metadata=ObjectMeta(name=name, uid=uid))


def _minimal_workload(kind: str) -> Callable[[str, str, str], WorkloadInfo]:
    return lambda uid, ns, name: WorkloadInfo(uid=uid, kind=kind, namespace=ns, name=name)


KINDS: dict[str, KindSpec] = {
    spec.plural: spec
    for spec in (
        KindSpec("Pod", "pods", "", "v1", True, _pod, lambda u, ns, n: PodInfo(uid=u, namespace=ns, name=n)),
        KindSpec(
            "PodMigrationJob",
            "podmigrationjobs",
            "scheduling.koordinator.sh",
            "v1alpha1",
            False,
            _pmj,
            _minimal_pmj,
        ),
        KindSpec(
            "Reservation",
            "reservations",
            "scheduling.koordinator.sh",
            "v1alpha1",
            False,
            _strict(Reservation, _minimal_reservation),
            _minimal_reservation,
        ),
        KindSpec(
            "PodDisruptionBudget",
            "poddisruptionbudgets",
            "policy",
            "v1",
            True,
            _pdb,
            lambda u, ns, n: PdbInfo(uid=u, namespace=ns, name=n),
        ),
        KindSpec(
            "Deployment",
            "deployments",
            "apps",
            "v1",
            True,
            _workload("Deployment"),
            _minimal_workload("Deployment"),
        ),
        KindSpec(
            "ReplicaSet",
            "replicasets",
            "apps",
            "v1",
            True,
            _workload("ReplicaSet"),
            _minimal_workload("ReplicaSet"),
        ),
        KindSpec(
            "StatefulSet",
            "statefulsets",
            "apps",
            "v1",
            True,
            _workload("StatefulSet"),
            _minimal_workload("StatefulSet"),
        ),
        KindSpec("Node", "nodes", "", "v1", False, _node, lambda u, ns, n: NodeInfo(uid=u, name=n)),
        KindSpec("ServiceAccount", "serviceaccounts", "", "v1", True, _account, _minimal_account),
    )
}
