"""A job's next status and the actions that move it on, from what is observed now (pure).

`progress(observed)` is the whole lifecycle of a PodMigrationJob, Koordinator's phases, conditions and
reasons, decided from the live job, its admission decision, its pod, its Reservation and the pod that took
the Reservation. It is a function of the present only, so the tracker may call it for any event, any
number of times, after any crash, on any replica: the same observation gives the same status and the same
(idempotent) actions.

ReservationFirst:  admitted -> reserve -> Reservation Available on another node -> evict -> the old pod is
gone -> a replacement binds the Reservation -> it is Ready -> Succeeded. EvictDirectly: admitted -> evict
-> the old pod is gone -> Succeeded. Gone means gone: a pod being deleted still holds the job (and its
ledger slots) until its object, with its uid, no longer exists; at the ttl the job fails naming it.
Failure paths end the job with Koordinator's reason, and every ending cleans up the Reservation and
releases the ledger's slots.
"""

from __future__ import annotations

from dataclasses import replace

from services.tracker.jobs import deadlines
from services.tracker.jobs.status_writer import StatusWriter
from services.tracker.jobs.views import (
    CLEANUP,
    EVICT,
    RELEASE,
    RESERVE,
    SCALE_BACK,
    SURGE,
    UNSURGE,
    Observed,
    PodView,
    ReservationView,
    Step,
)
from shared.api.meta import ObjectReference
from shared.api.names import (
    ANNOTATION_ABORT,
    ANNOTATION_ATOMIC,
    ANNOTATION_REQUESTER,
    ANNOTATION_STRATEGY_REASON,
    LABEL_ATOMIC_PLAN,
)
from shared.api.pmj import (
    COND_BOUND_POD_READY,
    COND_DISRUPTION_WINDOW,
    COND_EVICTION,
    COND_POD_BOUND_RESERVATION,
    COND_RESERVATION_BOUND,
    COND_RESERVATION_CREATED,
    COND_RESERVATION_SCHEDULED,
    MODE_EVICT_DIRECTLY,
    PHASE_ABORTED,
    PHASE_FAILED,
    PHASE_PENDING,
    PHASE_RUNNING,
    PHASE_SUCCEEDED,
    REASON_DRY_RUN,
    REASON_EVICT_COMPLETE,
    REASON_EVICTING,
    REASON_FAILED_CREATE_RESERVATION,
    REASON_FORBIDDEN_MIGRATE_POD,
    REASON_MISSING_POD,
    REASON_MISSING_RESERVATION,
    REASON_RESERVATION_EXPIRED,
    REASON_TIMEOUT,
    REASON_UNSCHEDULABLE,
    REASON_WAIT_FOR_BOUND_POD_READY,
    REASON_WAIT_FOR_POD_BIND_RESERVATION,
    STATUS_FALSE,
    STATUS_TRUE,
    STATUS_UNKNOWN,
    TERMINAL_PHASES,
    PodMigrationJob,
    PodMigrationJobStatus,
)
from shared.api.reservation import REASON_EXPIRED as RESERVATION_EXPIRED

__all__ = [
    "CLEANUP",
    "EVICT",
    "RELEASE",
    "RESERVE",
    "SCALE_BACK",
    "SURGE",
    "UNSURGE",
    "Observed",
    "PodView",
    "ReservationView",
    "Step",
    "progress",
    "settled",
]

REASON_ABORTED = "Aborted"
REASON_SURGING, REASON_SURGE_FAILED = "Surging", "SurgeFailed"


def settled(observed: Observed, step: Step, written: PodMigrationJob) -> bool:
    """Whether `step`, once written as `written`, is where the job rests until something else changes:
    deciding again from the same observation with the written status changes nothing and asks for no
    action `step` did not take. Then the PMJ event of that write brings nothing to decide."""
    again = progress(replace(observed, job=written))
    return (
        again.status == step.status
        and set(again.actions) <= set(step.actions)
        and again.attempt == step.attempt
    )


def progress(o: Observed) -> Step:
    return _run(StatusWriter(o))


def _run(w: StatusWriter) -> Step:
    o, job = w.o, w.o.job
    phase = w.old.phase or PHASE_PENDING
    if phase in TERMINAL_PHASES:
        return Step(w.old, w.endings())
    annotations = job.metadata.annotations or {}
    if ANNOTATION_ABORT in annotations:
        return w.end(
            PHASE_ABORTED, REASON_ABORTED, f"aborted: {annotations[ANNOTATION_ABORT] or 'by request'}"
        )
    if o.rejection is not None:
        reason, message = o.rejection
        return w.end(PHASE_FAILED, reason, message)
    if job.spec.paused and ANNOTATION_ATOMIC in annotations:
        return reserving_ahead(w)  # the drain's deadline holds, not the job's ttl (`atomic.py`)
    window = deadlines.window_mark(o)
    if window is not None and w.marks.set(
        COND_DISRUPTION_WINDOW, window.status, window.reason, message=window.message, now=window.since
    ):
        w.events.append(("Normal", window.reason, window.message))
    started = w.condition(COND_EVICTION) is not None
    if job.spec.paused and not started:
        # Koordinator's: a paused job is left as it is, its ttl too, until it is resumed (once its pod was
        # asked to go, the job is still followed to its end: pausing cannot take the eviction back).
        return w.stay(phase, w.old.reason or "", "paused: the job waits until spec.paused is false")
    if deadlines.expired(o):
        why = f"the job did not finish within its ttl {job.spec.ttl or o.default_ttl}"
        why += deadlines.counted_from(PodMigrationJobStatus(conditions=w.marks.items))
        if o.pod is not None and o.pod.terminating and w.condition(COND_EVICTION) is not None:
            why += f": {o.pod.going()}"
        elif w.old.message:
            why += f" (last: {w.old.message})"
        return w.end(PHASE_FAILED, REASON_TIMEOUT, why)
    if o.pod is None and not started:  # before admission too: the arbitrator's facts may lag
        ref = job.spec.pod_ref
        where = f"{ref.namespace}/{ref.name}" if ref else "the pod"
        return w.end(PHASE_FAILED, REASON_MISSING_POD, f"{where} no longer exists")
    if not o.admitted:
        if window is not None and window.waiting:
            return w.stay(PHASE_PENDING, window.reason, window.message)
        asked = (job.metadata.annotations or {}).get(ANNOTATION_REQUESTER)
        by = f"; requested by {asked}" if asked else ""
        why = f": {o.deferral}" if o.deferral else " (the arbitrator audits why)"
        return w.stay(PHASE_PENDING, "", f"waiting for admission{why}{by}")
    if o.dry_run:
        moved = "dry run: admitted; no Reservation created and no pod evicted"
        return w.end(PHASE_SUCCEEDED, REASON_DRY_RUN, moved)
    if (job.spec.mode or o.default_mode) == MODE_EVICT_DIRECTLY:
        return evict_directly(w, started)
    return reservation_first(w, started)


def evict_directly(w: StatusWriter, started: bool) -> Step:
    pod = w.o.pod
    if started and w.o.deleted_by_others:
        return deleted_by_others(w)
    if started and (pod is None or pod.terminating):
        w.set(COND_EVICTION, STATUS_TRUE, REASON_EVICT_COMPLETE, message="the pod was evicted")
        if pod is not None:  # gone means gone: not while the pod object (with its uid) still exists
            return w.stay(PHASE_RUNNING, "", f"evicted; waiting until it is gone: {pod.going()}")
        return w.end(PHASE_SUCCEEDED, "", "the pod was evicted")
    why = (w.o.job.metadata.annotations or {}).get(ANNOTATION_STRATEGY_REASON)
    return evicting(w, f"directly: {why}" if why else "")


def reservation_first(w: StatusWriter, started: bool) -> Step:
    o = w.o
    r = o.reservation
    if r is None:
        if o.reserve_failed:
            w.set(
                COND_RESERVATION_CREATED,
                STATUS_FALSE,
                REASON_FAILED_CREATE_RESERVATION,
                message=o.reserve_failed,
            )
            return w.end(PHASE_FAILED, REASON_FAILED_CREATE_RESERVATION, o.reserve_failed)
        if w.true(COND_RESERVATION_CREATED):
            return w.end(PHASE_FAILED, REASON_MISSING_RESERVATION, "the job's Reservation is gone")
        if o.reserve_retrying:  # as Koordinator: the condition False, tried again until the ttl
            retrying = f"{o.reserve_retrying} (trying again)"
            # The user's own, not made yet: nothing failed to be created (Koordinator sets no condition).
            if o.job.user_reservation:
                w.set(COND_RESERVATION_CREATED, STATUS_UNKNOWN, "", message=retrying)
            else:
                failed = REASON_FAILED_CREATE_RESERVATION
                w.set(COND_RESERVATION_CREATED, STATUS_FALSE, failed, message=retrying)
            step = w.stay(PHASE_RUNNING, "", retrying, actions=(RESERVE,))
            step.attempt = max(1, o.attempt)
            return step
        w.set(COND_RESERVATION_CREATED, STATUS_UNKNOWN, "", message="creating the Reservation")
        step = w.stay(PHASE_RUNNING, "", "creating the Reservation", actions=(RESERVE,))
        step.attempt = max(1, o.attempt)
        return step
    evicted = started and (o.pod is None or o.pod.terminating)
    if r.phase == "Succeeded" and not evicted and not o.surge:  # taken while the pod is still there
        return taken_early(w, r)
    w.set(COND_RESERVATION_CREATED, STATUS_TRUE, "", message=f"Reservation {r.name} created")
    if r.phase == "Failed":
        # As Koordinator: only a Reservation that expired ends the job ReservationExpired; one that failed
        # otherwise could not be placed.
        if r.failed_reason == RESERVATION_EXPIRED:
            return w.end(PHASE_FAILED, REASON_RESERVATION_EXPIRED, f"Reservation {r.name} expired")
        why = r.unschedulable or (r.failed_reason or "failed").lower()
        return w.end(PHASE_FAILED, REASON_UNSCHEDULABLE, f"Reservation {r.name}: {why}")
    if r.phase in ("Pending", "Waiting") or not r.node:
        unplaced = f"waiting for Reservation {r.name} to be scheduled"
        if r.unschedulable:
            # As Koordinator: the scheduler keeps trying it, and the job waits for it until its ttl (nothing
            # is evicted meanwhile); room freed elsewhere in a tight cluster still moves the pod.
            w.set(COND_RESERVATION_SCHEDULED, STATUS_FALSE, REASON_UNSCHEDULABLE, message=r.unschedulable)
            return w.stay(PHASE_RUNNING, "", f"{unplaced}: {r.unschedulable}")
        return w.stay(PHASE_RUNNING, "", unplaced)
    w.set(COND_RESERVATION_SCHEDULED, STATUS_TRUE, "", message=f"Reservation {r.name} scheduled on {r.node}")
    w.node = w.node or r.node
    pod = o.pod
    if pod is not None and pod.node == r.node and not started:
        return w.end(
            PHASE_FAILED,
            REASON_FORBIDDEN_MIGRATE_POD,
            f"Reservation {r.name} was scheduled on the pod's own node {r.node}",
        )
    if pod is not None and pod.node is None and not started:
        # A pending, unscheduled pod: nothing to evict; it moves by scheduling into the room itself.
        return w.stay(
            PHASE_RUNNING,
            REASON_WAIT_FOR_POD_BIND_RESERVATION,
            f"waiting for the pending pod to take Reservation {r.name}",
        )
    if o.surge:
        return surging(w, r)
    if pod is not None and not pod.terminating:
        return evicting(w)
    if o.deleted_by_others:
        return deleted_by_others(w)
    w.set(COND_EVICTION, STATUS_TRUE, REASON_EVICT_COMPLETE, message="the pod was evicted")
    if o.claimed is None:
        w.set(
            COND_POD_BOUND_RESERVATION,
            STATUS_FALSE,
            REASON_WAIT_FOR_POD_BIND_RESERVATION,
            message=f"waiting for a replacement to take Reservation {r.name}",
        )
        return w.stay(PHASE_RUNNING, REASON_WAIT_FOR_POD_BIND_RESERVATION, "waiting for the replacement pod")
    namespace, name, _ = o.claimed
    waiting = _replacement_ready(
        w, o.claimed, took="took a Reservation of the workload", whose="the replacement"
    )
    if waiting is not None:
        return waiting
    if pod is not None:  # the old pod still exists (a finalizer, a NotReady node): not moved yet
        return w.stay(PHASE_RUNNING, "", f"{namespace}/{name} is Ready; waiting: {pod.going()}")
    return w.end(PHASE_SUCCEEDED, "", f"moved to {name} on {w.node}")


def _replacement_ready(
    w: StatusWriter, claimed: tuple[str, str, str], *, took: str, whose: str
) -> Step | None:
    """The claimed replacement noted (it `took` the room); a step waiting for it to be Ready, or None once
    it is Ready in reserved room."""
    namespace, name, uid = claimed
    w.pod_ref = ObjectReference(namespace=namespace, name=name, uid=uid)
    who = f"{namespace}/{name}"
    w.set(COND_POD_BOUND_RESERVATION, STATUS_TRUE, "", message=f"{who} {took}")
    replacement = w.o.replacement
    if replacement is None or not replacement.ready:
        why = "is gone" if replacement is None else "is not Ready yet"
        w.set(COND_BOUND_POD_READY, STATUS_FALSE, REASON_WAIT_FOR_BOUND_POD_READY, message=f"{who} {why}")
        return w.stay(PHASE_RUNNING, REASON_WAIT_FOR_BOUND_POD_READY, f"{whose} {who} {why}")
    w.node = replacement.node or w.node
    w.set(COND_BOUND_POD_READY, STATUS_TRUE, "", message=f"{who} is Ready")
    w.set(COND_RESERVATION_BOUND, STATUS_TRUE, "", message=f"{who} runs in reserved room on {w.node}")
    return None


def surging(w: StatusWriter, r: ReservationView) -> Step:
    """Surge: the Deployment up by one, its new pod in the Reservation and Ready, then back down by one,
    its ReplicaSet removing the old pod (marked the cheapest to delete)."""
    o, pod = w.o, w.o.pod
    for report in (o.surged, o.scaled_back):
        if report is not None and report.outcome == "failed":
            return w.end(PHASE_FAILED, REASON_SURGE_FAILED, report.message)
    if o.claimed is None:
        if o.surged is None or o.surged.outcome != "done":
            note = f" ({o.surged.message})" if o.surged else ""
            message = f"surging: the Deployment up by one for Reservation {r.name}{note}"
            return w.stay(PHASE_RUNNING, REASON_SURGING, message, actions=(SURGE,))
        message = f"{o.surged.message}; waiting for its new pod to take Reservation {r.name}"
        w.set(
            COND_POD_BOUND_RESERVATION,
            STATUS_FALSE,
            REASON_WAIT_FOR_POD_BIND_RESERVATION,
            message=message,
        )
        return w.stay(PHASE_RUNNING, REASON_WAIT_FOR_POD_BIND_RESERVATION, message)
    namespace, name, _ = o.claimed
    who = f"{namespace}/{name}"
    waiting = _replacement_ready(w, o.claimed, took=f"took Reservation {r.name}", whose="the surge's pod")
    if waiting is not None:
        return waiting
    if pod is not None and not pod.terminating:
        message = "scaling the Deployment back down: its ReplicaSet removes the old pod"
        w.set(COND_EVICTION, STATUS_FALSE, REASON_EVICTING, message=message)
        return w.stay(PHASE_RUNNING, REASON_EVICTING, message, actions=(SCALE_BACK,))
    w.set(COND_EVICTION, STATUS_TRUE, REASON_EVICT_COMPLETE, message="the scale-down removed the old pod")
    if pod is not None:
        return w.stay(PHASE_RUNNING, "", f"{who} is Ready; waiting: {pod.going()}")
    return w.end(PHASE_SUCCEEDED, "", f"moved to {name} on {w.node} by a surge")


def taken_early(w: StatusWriter, r: ReservationView) -> Step:
    """The Reservation was taken before this job evicted its pod. Reservations are owned by the pod's
    controller (as in Koordinator), so a replacement of the same workload (another job's) may take any
    of them: then reserve again; the other job claims that replacement. Anyone else: forbidden."""
    taker = w.o.bound_pod
    pod = w.o.pod
    if taker is not None and pod is not None and taker.uid == pod.uid:
        # The job's own pending pod scheduled into the room: it has moved.
        w.pod_ref = ObjectReference(namespace=pod.namespace, name=pod.name, uid=pod.uid)
        w.node = taker.node or r.node
        w.set(
            COND_POD_BOUND_RESERVATION,
            STATUS_TRUE,
            "",
            message=f"{pod.namespace}/{pod.name} took Reservation {r.name}",
        )
        return w.end(PHASE_SUCCEEDED, "", f"the pending pod scheduled into Reservation {r.name}")
    same_workload = taker is not None and taker.controller_uid == r.owner_controller_uid
    if w.o.eviction_sent and same_workload:
        # Taken after the executor found it Available and sent the eviction: a replica of the workload
        # went and left its place. The eviction's outcome decides (evicted: it claims a replacement).
        message = f"Reservation {r.name} was taken after the room check; the eviction is on its way"
        w.set(COND_EVICTION, STATUS_FALSE, REASON_EVICTING, message=message)
        return w.stay(PHASE_RUNNING, REASON_EVICTING, message, actions=())
    if taker is not None and r.ours and r.owner_controller_uid and same_workload:
        who = f"{taker.namespace}/{taker.name}"
        message = f"Reservation {r.name} was taken by {who} of the same workload; reserving again"
        w.set(COND_RESERVATION_CREATED, STATUS_UNKNOWN, "", message=message)
        step = w.stay(PHASE_RUNNING, "", message, actions=(RESERVE,))
        step.attempt = w.o.attempt + 1
        return step
    who = f"{taker.namespace}/{taker.name}" if taker else "another pod"
    return w.end(
        PHASE_FAILED,
        REASON_FORBIDDEN_MIGRATE_POD,
        f"Reservation {r.name} was taken by {who} before the eviction",
    )


def evicting(w: StatusWriter, how: str = "") -> Step:
    note = w.o.eviction_note
    message = f"evicting: {note}" if note else "evicting the pod" + (f" {how}" if how else "")
    w.set(COND_EVICTION, STATUS_FALSE, REASON_EVICTING, message=message)
    step = w.stay(PHASE_RUNNING, REASON_EVICTING, message, actions=(EVICT,))
    # One eviction command per Reservation: after reserving again, the new one is not a duplicate.
    step.attempt = max(1, w.o.attempt)
    return step


def deleted_by_others(w: StatusWriter) -> Step:
    """The pod was deleted outright by someone else while its eviction waited: gone, but not moved."""
    ref = w.o.job.spec.pod_ref
    where = f"{ref.namespace}/{ref.name}" if ref else "the pod"
    return w.end(PHASE_FAILED, REASON_MISSING_POD, f"{where} was deleted by others before its eviction")


def reserving_ahead(w: StatusWriter) -> Step:
    """An atomic drain's or atomic plan's job: its room reserved, then paused until every pod of the drain
    (every move of the plan) has room."""
    o, r = w.o, w.o.reservation
    plan = (o.job.metadata.labels or {}).get(LABEL_ATOMIC_PLAN)
    whole, ahead = (
        (f"every move of atomic plan {plan}", f"atomic plan {plan}")
        if plan
        else (
            "every pod of the drain",
            "the drain",
        )
    )
    if (o.job.spec.mode or o.default_mode) == MODE_EVICT_DIRECTLY:
        return w.stay(PHASE_PENDING, "", f"to be evicted directly once {whole} has room")
    if r is None:
        why = f": {o.reserve_failed}" if o.reserve_failed else ""
        return w.stay(
            PHASE_PENDING,
            "",
            f"reserving room ahead of {ahead}{why}",
            actions=() if o.asked else (RESERVE,),
        )
    if r.phase == "Available" and r.node:
        return w.stay(
            PHASE_PENDING,
            "",
            f"room reserved on node {r.node}; moving once {whole} has room",
        )
    return w.stay(
        PHASE_PENDING, "", f"no room yet: {r.unschedulable or f'Reservation {r.name} is {r.phase}'}"
    )
