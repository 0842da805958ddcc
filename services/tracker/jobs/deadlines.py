"""When a job's ttl runs out, and when the tracker must look at a job again though nothing happens (pure).

A job's ttl counts from its creation or, when a disruption window gates it, from the opening of the window
it waits for or was admitted in (its `DisruptionWindow` condition records it): it does not run out while the
job waits for its window.
"""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from services.tracker.jobs.views import Observed
from shared.api.pmj import (
    COND_DISRUPTION_WINDOW,
    REASON_WAIT_FOR_WINDOW,
    REASON_WINDOW_OPEN,
    STATUS_FALSE,
    STATUS_TRUE,
    ConditionStatus,
    PodMigrationJobStatus,
)


def _at(moment: datetime) -> str:
    return f"{moment:%Y-%m-%dT%H:%M:%SZ}"


class WindowMark(NamedTuple):
    """The `DisruptionWindow` condition a job's window asks for; `since` is its lastTransitionTime."""

    status: ConditionStatus
    reason: str
    message: str
    since: datetime
    waiting: bool  # the window has not opened yet: the job waits for it


def window_mark(o: Observed) -> WindowMark | None:
    w = o.window
    if w is None:
        return None
    until = f"until {_at(w.closes_at)}"
    if w.opens_at > o.now and not o.admitted:
        message = f"waiting for disruption window {w.window}: it opens at {_at(w.opens_at)} ({until})"
        return WindowMark(STATUS_FALSE, REASON_WAIT_FOR_WINDOW, message, o.now, True)
    message = f"disruption window {w.window} opened at {_at(w.opens_at)} ({until})"
    return WindowMark(STATUS_TRUE, REASON_WINDOW_OPEN, message, w.opens_at, False)


def ttl_start(o: Observed, status: PodMigrationJobStatus | None) -> datetime | None:
    """When the job's ttl started counting; None while it waits for a window whose opening is not known
    (Redis lost it: the arbitrator, which still gates the job, tells it again)."""
    created = o.job.metadata.creation_timestamp or o.now
    if o.window is not None:
        return max(created, o.window.opens_at)
    mark = next(
        (c for c in (status.conditions if status else None) or [] if c.type == COND_DISRUPTION_WINDOW), None
    )
    if mark is None:
        return created
    if mark.status == STATUS_TRUE and mark.last_transition_time is not None:
        return max(created, mark.last_transition_time)
    return None


def counted_from(status: PodMigrationJobStatus) -> str:
    """How a timeout names where the ttl counted from, when not from the job's creation."""
    mark = next((c for c in status.conditions or [] if c.type == COND_DISRUPTION_WINDOW), None)
    return f" (counted from when {mark.message})" if mark is not None and mark.status == STATUS_TRUE else ""


def ttl_seconds(o: Observed) -> float:
    return o.job.spec.ttl_seconds(o.default_ttl)


def expired(o: Observed) -> bool:
    start = ttl_start(o, o.job.status)
    return start is not None and (o.now - start).total_seconds() > ttl_seconds(o)


def look_again_at(o: Observed, status: PodMigrationJobStatus) -> float:
    """When (epoch seconds) the job is reconciled though nothing happens to it: at its ttl's end, or when
    its window opens (its status says so from then on)."""
    start = ttl_start(o, status)
    ends = (start or o.now).timestamp() + ttl_seconds(o)
    if o.window is not None and o.window.opens_at > o.now and not o.admitted:
        return min(ends, o.window.opens_at.timestamp())
    return ends
