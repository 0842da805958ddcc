"""Which replacement a job may claim (pure).

Reservations are owned by the pod's controller, as in Koordinator, so a replacement may take the room any
job of its workload reserved. Once its pod is evicted, a job claims one replacement of the workload (one
claim per pod, first come); it looks at its own Reservations' pods first, then at replacements seen earlier
(the pool: their Reservation may be gone with its ended job), then at every Reservation of the workload.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from services.tracker.jobs.machine import ReservationView

Ident = tuple[str, str, str]  # namespace, name, uid of a pod


def candidates(
    own: Sequence[ReservationView], pool: Iterable[Ident], workload: Iterable[ReservationView]
) -> list[Ident]:
    """The replacements to try, in order, each once."""
    ordered = [b for r in own for b in r.bound]
    ordered.extend(pool)
    ordered.extend(b for r in workload for b in r.bound)
    return list(dict.fromkeys(ordered))


def may_claim(
    job_uid: str, holder: str | None, controller: str | None, *, pod_controller: str | None
) -> bool:
    """A replacement (that exists) is this job's to claim when no other job holds it and it is of the
    job's workload. Held by this job already: a claim whose bookkeeping a crash cut short."""
    if holder is not None and holder != job_uid:
        return False
    return not controller or pod_controller == controller
