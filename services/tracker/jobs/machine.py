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
from typing import Final, Literal

from services.tracker.jobs import deadlines
from services.tracker.jobs.views import Action, Conditions, Observed, PodView, ReservationView, Step
from shared.api.messages import Step as CommandStep
from shared.api.meta import ObjectReference
from shared.api.names import (
    ANNOTATION_ABORT,
    ANNOTATION_ATOMIC,
    ANNOTATION_REQUESTER,
    ANNOTATION_STRATEGY_REASON,
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
    STATUS_COMPLETE,
    STATUS_FALSE,
    STATUS_TRUE,
    STATUS_UNKNOWN,
    TERMINAL_PHASES,
    ConditionStatus,
    ConditionType,
    Phase,
    PodMigrationJob,
    PodMigrationJobCondition,
    PodMigrationJobStatus,
)

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

# The executor's steps (the commands' own type), and the tracker's one action of its own.
RESERVE: Final[CommandStep] = "reserve"
EVICT: Final[CommandStep] = "evict"
CLEANUP: Final[CommandStep] = "cleanup"
SURGE: Final[CommandStep] = "surge"
SCALE_BACK: Final[CommandStep] = "scale-back"
UNSURGE: Final[CommandStep] = "unsurge"
RELEASE: Final[Literal["release"]] = "release"
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
    return _Progress(o).run()


class _Writer:
    """A step's status as it is built: conditions set, events noted, the job ended or kept running."""

    def __init__(self, o: Observed) -> None:
        self.o = o
        old = o.job.status or PodMigrationJobStatus()
        self.old = old
        self.marks = Conditions(
            list(old.conditions or []), old.status if old.status != STATUS_COMPLETE else None
        )
        self.node = old.node_name
        self.pod_ref = old.pod_ref
        self.events: list[tuple[str, str, str]] = []

    def _endings(self) -> tuple[Action, ...]:
        ends: tuple[Action, ...] = (CLEANUP, RELEASE) if self.o.reservation is not None else (RELEASE,)
        return (*ends, UNSURGE) if self.o.surge else ends

    def end(self, phase: Phase, reason: str, message: str) -> Step:
        status = self._status(phase, reason, message)
        status.status = STATUS_COMPLETE
        kind = "Normal" if phase == PHASE_SUCCEEDED else "Warning"
        self.events.append((kind, reason or phase, message))
        return Step(status, self._endings(), self.events)

    def stay(self, phase: Phase, reason: str, message: str, *, actions: tuple[Action, ...] = ()) -> Step:
        return Step(self._status(phase, reason, message), actions, self.events)

    def _status(self, phase: Phase, reason: str, message: str) -> PodMigrationJobStatus:
        if phase != (self.old.phase or PHASE_PENDING) and phase == PHASE_RUNNING:
            self.events.append(("Normal", "Running", "the job is running"))
        return PodMigrationJobStatus(
            phase=phase,
            status=self.marks.last_changed,
            reason=reason or None,
            message=message,
            conditions=self.marks.items or None,
            node_name=self.node,
            pod_ref=self.pod_ref,
            preempted_pods_ref=self.old.preempted_pods_ref,
            preempted_pods_reservations=self.old.preempted_pods_reservations,
        )

    def set(self, kind: ConditionType, status: ConditionStatus, reason: str, *, message: str) -> None:
        if self.marks.set(kind, status, reason, message=message, now=self.o.now):
            self.events.append(("Normal", reason or kind, message))

    def _condition(self, kind: str) -> PodMigrationJobCondition | None:
        return self.marks.get(kind)

    def _true(self, kind: str) -> bool:
        return self.marks.true(kind)


class _Progress(_Writer):
    # ----------------------------------------------------------------------------------------------------

    def run(self) -> Step:
        o, job = self.o, self.o.job
        phase = self.old.phase or PHASE_PENDING
        if phase in TERMINAL_PHASES:
            return Step(self.old, self._endings())
        annotations = job.metadata.annotations or {}
        if ANNOTATION_ABORT in annotations:
            return self.end(
                PHASE_ABORTED, REASON_ABORTED, f"aborted: {annotations[ANNOTATION_ABORT] or 'by request'}"
            )
        if o.rejection is not None:
            reason, message = o.rejection
            return self.end(PHASE_FAILED, reason, message)
        if job.spec.paused and ANNOTATION_ATOMIC in annotations:
            return reserving_ahead(self)  # the drain's deadline holds, not the job's ttl (`atomic.py`)
        window = deadlines.window_mark(o)
        if window is not None and self.marks.set(
            COND_DISRUPTION_WINDOW, window.status, window.reason, message=window.message, now=window.since
        ):
            self.events.append(("Normal", window.reason, window.message))
        if deadlines.expired(o):
            why = f"the job did not finish within its ttl {job.spec.ttl or o.default_ttl}"
            why += deadlines.counted_from(PodMigrationJobStatus(conditions=self.marks.items))
            if o.pod is not None and o.pod.terminating and self._condition(COND_EVICTION) is not None:
                why += f": {o.pod.going()}"
            elif self.old.message:
                why += f" (last: {self.old.message})"
            return self.end(PHASE_FAILED, REASON_TIMEOUT, why)
        started = self._condition(COND_EVICTION) is not None
        if o.pod is None and not started:  # before admission too: the arbitrator's facts may lag
            ref = job.spec.pod_ref
            where = f"{ref.namespace}/{ref.name}" if ref else "the pod"
            return self.end(PHASE_FAILED, REASON_MISSING_POD, f"{where} no longer exists")
        if not o.admitted:
            if job.spec.paused:
                return self.stay(PHASE_PENDING, "", "paused: the job waits until spec.paused is false")
            if window is not None and window.waiting:
                return self.stay(PHASE_PENDING, window.reason, window.message)
            asked = (job.metadata.annotations or {}).get(ANNOTATION_REQUESTER)
            by = f"; requested by {asked}" if asked else ""
            why = f": {o.deferral}" if o.deferral else " (the arbitrator audits why)"
            return self.stay(PHASE_PENDING, "", f"waiting for admission{why}{by}")
        if o.dry_run:
            return self.end(
                PHASE_SUCCEEDED, "", "dry run: admitted; no Reservation created and no pod evicted"
            )
        if (job.spec.mode or o.default_mode) == MODE_EVICT_DIRECTLY:
            return self.evict_directly(started)
        return self.reservation_first(started)

    def evict_directly(self, started: bool) -> Step:
        pod = self.o.pod
        if started and self.o.deleted_by_others:
            return deleted_by_others(self)
        if started and (pod is None or pod.terminating):
            self.set(COND_EVICTION, STATUS_TRUE, REASON_EVICT_COMPLETE, message="the pod was evicted")
            if pod is not None:  # gone means gone: not while the pod object (with its uid) still exists
                return self.stay(PHASE_RUNNING, "", f"evicted; waiting until it is gone: {pod.going()}")
            return self.end(PHASE_SUCCEEDED, "", "the pod was evicted")
        why = (self.o.job.metadata.annotations or {}).get(ANNOTATION_STRATEGY_REASON)
        return self.evicting(f"directly: {why}" if why else "")

    def reservation_first(self, started: bool) -> Step:
        o = self.o
        r = o.reservation
        if r is None:
            if o.reserve_failed:
                self.set(
                    COND_RESERVATION_CREATED,
                    STATUS_FALSE,
                    REASON_FAILED_CREATE_RESERVATION,
                    message=o.reserve_failed,
                )
                return self.end(PHASE_FAILED, REASON_FAILED_CREATE_RESERVATION, o.reserve_failed)
            if self._true(COND_RESERVATION_CREATED):
                return self.end(PHASE_FAILED, REASON_MISSING_RESERVATION, "the job's Reservation is gone")
            self.set(COND_RESERVATION_CREATED, STATUS_UNKNOWN, "", message="creating the Reservation")
            step = self.stay(PHASE_RUNNING, "", "creating the Reservation", actions=(RESERVE,))
            step.attempt = max(1, o.attempt)
            return step
        evicted = started and (o.pod is None or o.pod.terminating)
        if r.phase == "Succeeded" and not evicted and not o.surge:  # taken while the pod is still there
            return self.taken_early(r)
        self.set(COND_RESERVATION_CREATED, STATUS_TRUE, "", message=f"Reservation {r.name} created")
        if r.phase == "Failed":
            why = r.failed_reason or "failed"
            return self.end(PHASE_FAILED, REASON_RESERVATION_EXPIRED, f"Reservation {r.name} {why.lower()}")
        if r.phase in ("Pending", "Waiting") or not r.node:
            if r.unschedulable:
                self.set(
                    COND_RESERVATION_SCHEDULED, STATUS_FALSE, REASON_UNSCHEDULABLE, message=r.unschedulable
                )
                return self.end(
                    PHASE_FAILED, REASON_UNSCHEDULABLE, f"Reservation {r.name}: {r.unschedulable}"
                )
            return self.stay(PHASE_RUNNING, "", f"waiting for Reservation {r.name} to be scheduled")
        self.set(
            COND_RESERVATION_SCHEDULED, STATUS_TRUE, "", message=f"Reservation {r.name} scheduled on {r.node}"
        )
        self.node = self.node or r.node
        pod = o.pod
        if pod is not None and pod.node == r.node and not started:
            return self.end(
                PHASE_FAILED,
                REASON_FORBIDDEN_MIGRATE_POD,
                f"Reservation {r.name} was scheduled on the pod's own node {r.node}",
            )
        if pod is not None and pod.node is None and not started:
            # A pending, unscheduled pod: nothing to evict; it moves by scheduling into the room itself.
            return self.stay(
                PHASE_RUNNING,
                REASON_WAIT_FOR_POD_BIND_RESERVATION,
                f"waiting for the pending pod to take Reservation {r.name}",
            )
        if o.surge:
            return self.surging(r)
        if pod is not None and not pod.terminating:
            return self.evicting()
        if o.deleted_by_others:
            return deleted_by_others(self)
        self.set(COND_EVICTION, STATUS_TRUE, REASON_EVICT_COMPLETE, message="the pod was evicted")
        if o.claimed is None:
            self.set(
                COND_POD_BOUND_RESERVATION,
                STATUS_FALSE,
                REASON_WAIT_FOR_POD_BIND_RESERVATION,
                message=f"waiting for a replacement to take Reservation {r.name}",
            )
            return self.stay(
                PHASE_RUNNING, REASON_WAIT_FOR_POD_BIND_RESERVATION, "waiting for the replacement pod"
            )
        namespace, name, _ = o.claimed
        waiting = self._replacement_ready(
            o.claimed, took="took a Reservation of the workload", whose="the replacement"
        )
        if waiting is not None:
            return waiting
        if pod is not None:  # the old pod still exists (a finalizer, a NotReady node): not moved yet
            return self.stay(PHASE_RUNNING, "", f"{namespace}/{name} is Ready; waiting: {pod.going()}")
        return self.end(PHASE_SUCCEEDED, "", f"moved to {name} on {self.node}")

    def _replacement_ready(self, claimed: tuple[str, str, str], *, took: str, whose: str) -> Step | None:
        """The claimed replacement noted (it `took` the room); a step waiting for it to be Ready, or None once
        it is Ready in reserved room."""
        namespace, name, uid = claimed
        self.pod_ref = ObjectReference(namespace=namespace, name=name, uid=uid)
        who = f"{namespace}/{name}"
        self.set(COND_POD_BOUND_RESERVATION, STATUS_TRUE, "", message=f"{who} {took}")
        replacement = self.o.replacement
        if replacement is None or not replacement.ready:
            why = "is gone" if replacement is None else "is not Ready yet"
            self.set(
                COND_BOUND_POD_READY, STATUS_FALSE, REASON_WAIT_FOR_BOUND_POD_READY, message=f"{who} {why}"
            )
            return self.stay(PHASE_RUNNING, REASON_WAIT_FOR_BOUND_POD_READY, f"{whose} {who} {why}")
        self.node = replacement.node or self.node
        self.set(COND_BOUND_POD_READY, STATUS_TRUE, "", message=f"{who} is Ready")
        self.set(
            COND_RESERVATION_BOUND, STATUS_TRUE, "", message=f"{who} runs in reserved room on {self.node}"
        )
        return None

    def surging(self, r: ReservationView) -> Step:
        """Surge: the Deployment up by one, its new pod in the Reservation and Ready, then back down by one,
        its ReplicaSet removing the old pod (marked the cheapest to delete)."""
        o, pod = self.o, self.o.pod
        for report in (o.surged, o.scaled_back):
            if report is not None and report.outcome == "failed":
                return self.end(PHASE_FAILED, REASON_SURGE_FAILED, report.message)
        if o.claimed is None:
            if o.surged is None or o.surged.outcome != "done":
                note = f" ({o.surged.message})" if o.surged else ""
                message = f"surging: the Deployment up by one for Reservation {r.name}{note}"
                return self.stay(PHASE_RUNNING, REASON_SURGING, message, actions=(SURGE,))
            message = f"{o.surged.message}; waiting for its new pod to take Reservation {r.name}"
            self.set(
                COND_POD_BOUND_RESERVATION,
                STATUS_FALSE,
                REASON_WAIT_FOR_POD_BIND_RESERVATION,
                message=message,
            )
            return self.stay(PHASE_RUNNING, REASON_WAIT_FOR_POD_BIND_RESERVATION, message)
        namespace, name, _ = o.claimed
        who = f"{namespace}/{name}"
        waiting = self._replacement_ready(
            o.claimed, took=f"took Reservation {r.name}", whose="the surge's pod"
        )
        if waiting is not None:
            return waiting
        if pod is not None and not pod.terminating:
            message = "scaling the Deployment back down: its ReplicaSet removes the old pod"
            self.set(COND_EVICTION, STATUS_UNKNOWN, REASON_EVICTING, message=message)
            return self.stay(PHASE_RUNNING, REASON_EVICTING, message, actions=(SCALE_BACK,))
        self.set(
            COND_EVICTION, STATUS_TRUE, REASON_EVICT_COMPLETE, message="the scale-down removed the old pod"
        )
        if pod is not None:
            return self.stay(PHASE_RUNNING, "", f"{who} is Ready; waiting: {pod.going()}")
        return self.end(PHASE_SUCCEEDED, "", f"moved to {name} on {self.node} by a surge")

    def taken_early(self, r: ReservationView) -> Step:
        """The Reservation was taken before this job evicted its pod. Reservations are owned by the pod's
        controller (as in Koordinator), so a replacement of the same workload (another job's) may take any
        of them: then reserve again; the other job claims that replacement. Anyone else: forbidden."""
        taker = self.o.bound_pod
        pod = self.o.pod
        if taker is not None and pod is not None and taker.uid == pod.uid:
            # The job's own pending pod scheduled into the room: it has moved.
            self.pod_ref = ObjectReference(namespace=pod.namespace, name=pod.name, uid=pod.uid)
            self.node = taker.node or r.node
            self.set(
                COND_POD_BOUND_RESERVATION,
                STATUS_TRUE,
                "",
                message=f"{pod.namespace}/{pod.name} took Reservation {r.name}",
            )
            return self.end(PHASE_SUCCEEDED, "", f"the pending pod scheduled into Reservation {r.name}")
        same_workload = taker is not None and taker.controller_uid == r.owner_controller_uid
        if self.o.eviction_sent and same_workload:
            # Taken after the executor found it Available and sent the eviction: a replica of the workload
            # went and left its place. The eviction's outcome decides (evicted: it claims a replacement).
            message = f"Reservation {r.name} was taken after the room check; the eviction is on its way"
            self.set(COND_EVICTION, STATUS_UNKNOWN, REASON_EVICTING, message=message)
            return self.stay(PHASE_RUNNING, REASON_EVICTING, message, actions=())
        if taker is not None and r.ours and r.owner_controller_uid and same_workload:
            who = f"{taker.namespace}/{taker.name}"
            message = f"Reservation {r.name} was taken by {who} of the same workload; reserving again"
            self.set(COND_RESERVATION_CREATED, STATUS_UNKNOWN, "", message=message)
            step = self.stay(PHASE_RUNNING, "", message, actions=(RESERVE,))
            step.attempt = self.o.attempt + 1
            return step
        who = f"{taker.namespace}/{taker.name}" if taker else "another pod"
        return self.end(
            PHASE_FAILED,
            REASON_FORBIDDEN_MIGRATE_POD,
            f"Reservation {r.name} was taken by {who} before the eviction",
        )

    def evicting(self, how: str = "") -> Step:
        note = self.o.eviction_note
        message = f"evicting: {note}" if note else "evicting the pod" + (f" {how}" if how else "")
        self.set(COND_EVICTION, STATUS_UNKNOWN, REASON_EVICTING, message=message)
        step = self.stay(PHASE_RUNNING, REASON_EVICTING, message, actions=(EVICT,))
        # One eviction command per Reservation: after reserving again, the new one is not a duplicate.
        step.attempt = max(1, self.o.attempt)
        return step


def deleted_by_others(w: _Writer) -> Step:
    """The pod was deleted outright by someone else while its eviction waited: gone, but not moved."""
    ref = w.o.job.spec.pod_ref
    where = f"{ref.namespace}/{ref.name}" if ref else "the pod"
    return w.end(PHASE_FAILED, REASON_MISSING_POD, f"{where} was deleted by others before its eviction")


def reserving_ahead(w: _Writer) -> Step:
    """An atomic drain's job: its room reserved, then paused until every pod of the drain has room."""
    o, r = w.o, w.o.reservation
    if (o.job.spec.mode or o.default_mode) == MODE_EVICT_DIRECTLY:
        return w.stay(PHASE_PENDING, "", "to be evicted directly once every pod of the drain has room")
    if r is None:
        why = f": {o.reserve_failed}" if o.reserve_failed else ""
        return w.stay(
            PHASE_PENDING,
            "",
            f"reserving room ahead of the drain{why}",
            actions=() if o.asked else (RESERVE,),
        )
    if r.phase == "Available" and r.node:
        return w.stay(
            PHASE_PENDING,
            "",
            f"room reserved on node {r.node}; moving once every pod of the drain has room",
        )
    return w.stay(
        PHASE_PENDING, "", f"no room yet: {r.unschedulable or f'Reservation {r.name} is {r.phase}'}"
    )
