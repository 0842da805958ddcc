"""Why a job that timed out waited: read from the conditions its status ended with (the first step of its
flow that never came true) and, for a job never admitted, from the arbitrator's last deferral on the audit
stream. Each cause names the condition it comes from; "unknown" means the status does not say, which is a
defect of the status, not of the cluster."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from shared.api.meta import parse_time
from shared.api.pmj import (
    COND_BOUND_POD_READY,
    COND_EVICTION,
    COND_POD_BOUND_RESERVATION,
    COND_RESERVATION_BOUND,
    COND_RESERVATION_CREATED,
    COND_RESERVATION_SCHEDULED,
    MODE_EVICT_DIRECTLY,
    REASON_TIMEOUT,
    STATUS_TRUE,
)
from shared.core.durations import parse_duration

UNKNOWN = "unknown"

# The steps of a ReservationFirst job, in the order they come true.
RESERVATION_FIRST_FLOW = (
    COND_RESERVATION_CREATED,
    COND_RESERVATION_SCHEDULED,
    COND_EVICTION,
    COND_POD_BOUND_RESERVATION,
    COND_BOUND_POD_READY,
    COND_RESERVATION_BOUND,
)

_STUCK_AT = {
    COND_RESERVATION_CREATED: "ReservationCreated: the Reservation was not created",
    COND_RESERVATION_SCHEDULED: "ReservationScheduled: the Reservation was not scheduled",
    COND_POD_BOUND_RESERVATION: "PodBoundReservation: no replacement bound the Reservation",
    COND_BOUND_POD_READY: "BoundPodReady: the replacement did not become Ready",
}


def timed_out(job: Mapping[str, Any]) -> bool:
    status = job.get("status") or {}
    return bool(status.get("phase") == "Failed" and status.get("reason") == REASON_TIMEOUT)


def why_timed_out(
    job: Mapping[str, Any], last_deferral: str | None, default_mode: str, *, default_ttl: str = "5m"
) -> str:
    """The cause of a Timeout, as `<condition>: <what did not happen>`: where the job spent most of its
    ttl, waiting for admission (its first condition came late) or at the first step that never came true."""
    status = job.get("status") or {}
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    admission = f"Admission: deferred ({last_deferral})" if last_deferral else UNKNOWN
    if not conditions:
        return admission  # never admitted: the arbitrator's last word says why (unknown if it said none)
    if last_deferral and _mostly_pending(job, conditions.values(), default_ttl):
        return admission
    mode = (job.get("spec") or {}).get("mode") or default_mode
    flow = (COND_EVICTION,) if mode == MODE_EVICT_DIRECTLY else RESERVATION_FIRST_FLOW
    for kind in flow:
        condition = conditions.get(kind)
        if condition is not None and condition.get("status") == STATUS_TRUE:
            continue
        if kind == COND_EVICTION:
            return _eviction(condition)
        if kind == COND_RESERVATION_BOUND:
            return UNKNOWN  # the replacement was Ready, yet the move was not written
        return _STUCK_AT[kind]
    if "terminating" in (status.get("message") or ""):
        return "Eviction: the old pod was stuck terminating"
    return UNKNOWN


def _mostly_pending(
    job: Mapping[str, Any], conditions: Iterable[Mapping[str, Any]], default_ttl: str
) -> bool:
    """Admitted after more than half its ttl: the wait for admission, not the step it timed out at."""
    created = parse_time((job.get("metadata") or {}).get("creationTimestamp"))
    started = [t for c in conditions if (t := parse_time(c.get("lastTransitionTime"))) is not None]
    if created is None or not started:
        return False
    ttl = parse_duration((job.get("spec") or {}).get("ttl") or default_ttl)
    return (min(started) - created).total_seconds() > ttl / 2


def _eviction(condition: Mapping[str, Any] | None) -> str:
    message = (condition or {}).get("message") or ""
    if condition is None:
        return UNKNOWN  # the Reservation was scheduled, yet no eviction was ever asked for
    if "disruption budget" in message:
        return "Eviction: refused by a PodDisruptionBudget"
    if "not evicting:" in message:
        return "Eviction: no room to evict into"
    if "Eviction triggered evacuation" in message:
        return "Eviction: evicting in background"
    return "Eviction: asked for, never confirmed by the executor"
