"""What the rules decide on: the job, its pod (the watcher's PodInfo), its workload and budget."""

from __future__ import annotations

from typing import Protocol

import msgspec

from shared.api import annotations as known
from shared.api import codec
from shared.api.drain import LIFTABLE, lifts_of
from shared.api.messages import PodInfo
from shared.api.names import ANNOTATION_DRAIN_NODE, ANNOTATION_MIGRATION_PRIORITY
from shared.api.pmj import PodMigrationJob
from shared.api.surge import is_surge

__all__ = ["JobFacts", "PdbFacts", "PodInfo", "WorkloadFacts", "available", "facts_of", "workload_key"]


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


class JobFacts(msgspec.Struct, frozen=True):
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
    # The filters a node drain lifts for its own jobs (`podherd.io/drain-lifts`: LocalStorage, BarePod).
    lifts: frozenset[str] = frozenset()
    # Moved by Surge (`podherd.io/strategy`): charged against its workload's replicas plus one.
    surge: bool = False
    # A node drain's job: Surge wherever its workload cannot spare the pod, whatever `surge`'s switches say.
    drain: bool = False
    # Annotated `descheduler.alpha.kubernetes.io/evict` (the job, not its pod): the object limiters pass it.
    evict: bool = False


class WorkloadFacts(msgspec.Struct, frozen=True):
    """A pod's workload: `key` identifies it in the ledger (kind/namespace/name). How many of its replicas
    are available the ledger counts itself, from the pods (`available`)."""

    key: str
    replicas: int
    past_migrations: int = 0


class PdbFacts(msgspec.Struct, frozen=True):
    key: str  # namespace/name
    disruptions_allowed: int
    names: tuple[str, ...] = ()


def facts_of(job: PodMigrationJob, default_mode: str) -> JobFacts:
    """What the rules read of a job (its past failures are the ledger's to count: 0 here)."""
    ref = job.spec.pod_ref
    annotations = job.metadata.annotations or {}
    try:
        migration_priority = int(annotations.get(ANNOTATION_MIGRATION_PRIORITY, "0"))
    except ValueError:
        migration_priority = 0
    created = job.metadata.creation_timestamp
    return JobFacts(
        name=job.metadata.name or "",
        uid=job.metadata.uid or "",
        pod_namespace=(ref.namespace or "") if ref else "",
        pod_name=(ref.name or "") if ref else "",
        mode=job.spec.mode or default_mode,
        created_at=created.timestamp() if created else 0.0,
        migration_priority=migration_priority,
        lifts=lifts_of(annotations),
        surge=is_surge(annotations),
        drain=ANNOTATION_DRAIN_NODE in annotations,
        evict=known.EVICT in annotations,
    )


# A queued job as kept: name, uid, pod namespace, pod name, mode, creation time, migration priority, the
# filters its drain lifts (comma-separated), whether it surges and whether it is a drain's (these three
# absent in what an older replica kept).
_QUEUED = msgspec.json.Decoder(tuple[str, str, str, str, str, float, int, str, bool, bool, bool])
_QUEUED_BEFORE_EVICT = msgspec.json.Decoder(tuple[str, str, str, str, str, float, int, str, bool, bool])
_QUEUED_BEFORE_DRAINS = msgspec.json.Decoder(tuple[str, str, str, str, str, float, int])


def queued_record(facts: JobFacts) -> bytes:
    """A queued job as the arbitrator keeps it: its facts, in a JSON array, not its whole PodMigrationJob
    (a pass reads a few hundred of them at a time)."""
    return codec.encode(
        (
            facts.name,
            facts.uid,
            facts.pod_namespace,
            facts.pod_name,
            facts.mode,
            facts.created_at,
            facts.migration_priority,
            ",".join(sorted(facts.lifts)),
            facts.surge,
            facts.drain,
            facts.evict,
        )
    )


def queued_facts(data: bytes | str, default_mode: str) -> JobFacts:
    """A queued job's facts, from `queued_record` or from the whole PodMigrationJob an older replica kept."""
    text = data.encode() if isinstance(data, str) else data
    if not text.startswith(b"["):
        return facts_of(codec.decode(text, PodMigrationJob), default_mode)
    evict = False
    try:
        decoded = _QUEUED.decode(text)
        name, uid, namespace, pod, mode, created_at, priority, lifts, surge, drain, evict = decoded
    except msgspec.ValidationError:
        try:
            before = _QUEUED_BEFORE_EVICT.decode(text)
            name, uid, namespace, pod, mode, created_at, priority, lifts, surge, drain = before
        except msgspec.ValidationError:
            name, uid, namespace, pod, mode, created_at, priority = _QUEUED_BEFORE_DRAINS.decode(text)
            lifts, surge, drain = "", False, False
    lifted = frozenset(lifts.split(",")) & LIFTABLE if lifts else frozenset()
    return JobFacts(
        name,
        uid,
        namespace,
        pod,
        mode,
        created_at,
        priority,
        lifts=lifted,
        surge=surge,
        drain=drain,
        evict=evict,
    )
