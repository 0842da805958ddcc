"""What the rules decide on: the job, its pod (the watcher's PodInfo), its workload and budget."""

from __future__ import annotations

from dataclasses import dataclass, field

from shared.api.messages import PodInfo

__all__ = ["JobFacts", "PdbFacts", "PodInfo", "WorkloadFacts"]


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
    """A pod's workload: `key` identifies it in the ledger (kind/namespace/name)."""

    key: str
    replicas: int
    available: int
    past_migrations: int = 0

    @property
    def unavailable(self) -> int:
        return max(0, self.replicas - self.available)


@dataclass(frozen=True)
class PdbFacts:
    key: str  # namespace/name
    disruptions_allowed: int
    names: tuple[str, ...] = field(default=())
