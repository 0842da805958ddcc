"""What an eviction of a pod opted in to evacuation becomes (pure): let through, a job started for it, or
refused with the state of its job. The Eviction API's 429 with "Eviction triggered evacuation" is what an
evicter that knows KEP-1397 (the descheduler) takes for "moving in the background"; any other evicter
(kubectl drain, cluster-autoscaler) retries the eviction, and each retry is told the job's state."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import msgspec

from shared.api.annotations import EVICTION_IN_PROGRESS
from shared.api.names import ANNOTATION_REQUESTER, LABEL_EVACUATE, LABEL_EVACUATED_POD
from shared.api.pmj import PHASE_ABORTED, PHASE_FAILED, PHASE_SUCCEEDED, PodMigrationJob
from shared.config.model import InterceptorConfig
from shared.core.durations import parse_duration

OPT_IN: Final = LABEL_EVACUATE
# The descheduler's EvictionInBackgroundErrorText: the words it recognizes a background eviction by.
TRIGGERED: Final = "Eviction triggered evacuation"
IN_PROGRESS: Final = "Evacuation in progress"
TOO_MANY_REQUESTS: Final = 429
# How long after a job moved a pod its evicter's retries of the same name are taken for retries (kubectl drain
# retries every 5 s; a StatefulSet's replacement has the old pod's name).
RETRIED_FOR: Final = timedelta(minutes=2)
FAILED_PHASES: Final = (PHASE_FAILED, PHASE_ABORTED)  # an aborted job ended as a failed one did


class PodView(msgspec.Struct, frozen=True, kw_only=True):
    namespace: str
    name: str
    uid: str
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    terminating: bool = False
    marked: bool = False  # annotated as evicted in the background


class Allow(msgspec.Struct, frozen=True):
    warning: str = ""


class Start(msgspec.Struct, frozen=True):
    """A job for the pod; `replace`: its failed job is deleted first."""

    replace: bool = False


class Wait(msgspec.Struct, frozen=True):
    message: str


def pod_view(namespace: str, name: str, raw: dict[str, Any]) -> PodView:
    """What the gate reads of a pod, from the API's JSON."""
    meta = raw.get("metadata") or {}
    return PodView(
        namespace=namespace,
        name=name,
        uid=str(meta.get("uid") or ""),
        labels=meta.get("labels") or {},
        terminating=bool(meta.get("deletionTimestamp")),
        marked=EVICTION_IN_PROGRESS in (meta.get("annotations") or {}),
    )


def job_name(pod_uid: str) -> str:
    """One name per pod: every eviction of it finds the same job."""
    return f"evacuation-{pod_uid}"


def pod_key(namespace: str, name: str) -> str:
    return hashlib.sha256(f"{namespace}/{name}".encode()).hexdigest()[:32]


def moved_by(pod: PodView, jobs: list[PodMigrationJob], *, evicter: str, now: datetime) -> str | None:
    """The job that just moved the pod this eviction is a retry for, when `pod` is its replacement under the
    same name (a StatefulSet's): asked for by the same evicter, ended within RETRIED_FOR. The evicter wants
    the pod it named gone, and it is: the answer is that it is not found, not a second move."""
    for job in jobs:
        replacement = job.status.pod_ref if job.status else None
        requester = (job.metadata.annotations or {}).get(ANNOTATION_REQUESTER)
        if (
            job.phase == PHASE_SUCCEEDED
            and replacement is not None
            and replacement.uid == pod.uid
            and requester == evicter
            and now - ended_at(job) <= RETRIED_FOR
        ):
            return job.metadata.name
    return None


def made_for(job: PodMigrationJob, pod: PodView) -> bool:
    """Whether `job`, found under the name the gate gives the pod's job, is the gate's job for this pod: it
    names the pod (namespace, name and uid) and carries the gate's mark, which only Podherd may write."""
    ref = job.spec.pod_ref
    marked = (job.metadata.labels or {}).get(LABEL_EVACUATED_POD) == pod_key(pod.namespace, pod.name)
    return (
        marked
        and ref is not None
        and (ref.namespace, ref.name, ref.uid) == (pod.namespace, pod.name, pod.uid)
    )


def squatted(pod: PodView, job: str) -> str:
    return (
        f"PodMigrationJob {job} holds the name of the job for pod {pod.namespace}/{pod.name} but was not "
        "made by Podherd for it: the eviction is refused until that job is deleted"
    )


def opted_in(pod: PodView, namespace_opted: bool) -> bool:
    value = pod.labels.get(OPT_IN)
    return value == "true" or (namespace_opted and value != "false")


def decide(
    pod: PodView | None,
    job: PodMigrationJob | None,
    *,
    policy: InterceptorConfig,
    now: datetime,
) -> Allow | Start | Wait:
    """For an evicter other than Podherd's executor, of a pod opted in (`pod` None: it is gone)."""
    if pod is None or pod.terminating:
        return Allow()  # nothing left to move: the API server answers for the pod as it is
    if job is None:
        return Start()
    name, phase = job.metadata.name, job.phase
    if phase == PHASE_SUCCEEDED:
        return Allow()  # its replacement has taken its room; what is left of it may go
    status = job.status
    why = f"{status.reason or phase}: {status.message or 'no message'}" if status else phase
    if phase not in FAILED_PHASES:
        return Wait(f"{IN_PROGRESS}: PodMigrationJob {name} is {phase} ({why})")
    if policy.on_failure == "evict":
        return Allow(
            f"PodMigrationJob {name} {phase.lower()} ({why}); evicted without a room (onFailure: evict)"
        )
    again = ended_at(job) + timedelta(seconds=parse_duration(policy.retry_after))
    if now >= again:
        return Start(replace=True)
    return Wait(
        f"Evacuation failed: PodMigrationJob {name} {phase.lower()} ({why}); an eviction from "
        f"{again:%Y-%m-%dT%H:%M:%SZ} on starts a new one (onFailure: retry)"
    )


def ended_at(job: PodMigrationJob) -> datetime:
    """When the job ended (failed, or succeeded): its last condition's transition (its creation when it has
    none)."""
    conditions = (job.status.conditions if job.status else None) or []
    times = [c.last_transition_time for c in conditions if c.last_transition_time is not None]
    return max(times, default=job.metadata.creation_timestamp or datetime.min.replace(tzinfo=UTC))


def gone_by(pod: PodView, job: str) -> str:
    """The answer to a retry for a pod `job` moved: as the API server says a pod is not found."""
    return (
        f'pods "{pod.name}" not found: PodMigrationJob {job} moved it, and {pod.namespace}/{pod.name} '
        "is now its replacement"
    )


def triggered(pod: PodView, job: str | None) -> str:
    """`job` None: a dry run, which makes no job and names none."""
    if job is None:
        return f'{TRIGGERED} of pod "{pod.namespace}/{pod.name}": a PodMigrationJob would move it (dry run)'
    return f'{TRIGGERED} of pod "{pod.namespace}/{pod.name}": PodMigrationJob {job} moves it'
