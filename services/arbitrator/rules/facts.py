"""What the rules decide on: the job, its pod (the watcher's PodInfo), its workload and budget."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from shared.api.messages import PodInfo

__all__ = ["JobFacts", "PdbFacts", "PodInfo", "WorkloadFacts", "available", "workload_key"]


def available(pod: PodInfo) -> bool:
    """A replica that counts as available for maxUnavailablePerWorkload: active and Ready (Koordinator's
    `IsPodActive && IsPodReady`)."""
    return pod.ready and pod.deletion_timestamp is None and pod.phase not in ("Succeeded", "Failed")


class _Workload(Protocol):
    kind: str
    namespace: str
    name: str


def workload_key(ref: _Workload) -> str:
    """How the ledger names a workload (from a pod's reference to it, or the workload itself):
    `Kind/namespace/name`."""
    return f"{ref.kind}/{ref.namespace}/{ref.name}"


@dataclass(frozen=True)
class JobFacts:
    name: str
    uid: str
    pod_namespace: str
    pod_name: str
    mode: str = "ReservationFirst"
    created_at: float = 0.0
    # Migration priority (intent `priority`, or the `podherd.io/migration-priority` annotation).
    migration_priority: int = 0
    # Past failed migration attempts of this pod (the tracker counts them).
    failed_attempts: int = 0


@dataclass(frozen=True)
class WorkloadFacts:
    """A pod's workload: `key` identifies it in the ledger (kind/namespace/name). How many of its replicas
    are available the ledger counts itself, from the pods (`available`)."""

    key: str
    replicas: int
    past_migrations: int = 0


@dataclass(frozen=True)
class PdbFacts:
    key: str  # namespace/name
    disruptions_allowed: int
    names: tuple[str, ...] = field(default=())
