"""A job's next status as the machine builds it: conditions set, Kubernetes Events noted, the job ended (with
the actions every ending takes) or kept running."""

from __future__ import annotations

from services.tracker.jobs.views import CLEANUP, RELEASE, UNSURGE, Action, Conditions, Observed, Step
from shared.api.pmj import (
    PHASE_PENDING,
    PHASE_RUNNING,
    PHASE_SUCCEEDED,
    STATUS_COMPLETE,
    ConditionStatus,
    ConditionType,
    Phase,
    PodMigrationJobCondition,
    PodMigrationJobStatus,
)


class StatusWriter:
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

    def endings(self) -> tuple[Action, ...]:
        ends: tuple[Action, ...] = (CLEANUP, RELEASE) if self.o.reservation is not None else (RELEASE,)
        return (*ends, UNSURGE) if self.o.surge else ends

    def end(self, phase: Phase, reason: str, message: str) -> Step:
        status = self._status(phase, reason, message)
        status.status = STATUS_COMPLETE
        kind = "Normal" if phase == PHASE_SUCCEEDED else "Warning"
        self.events.append((kind, reason or phase, message))
        return Step(status, self.endings(), self.events)

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

    def condition(self, kind: str) -> PodMigrationJobCondition | None:
        return self.marks.get(kind)

    def true(self, kind: str) -> bool:
        return self.marks.true(kind)
