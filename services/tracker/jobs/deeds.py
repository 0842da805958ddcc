"""What carrying out a step takes, in order (pure): the machine decides a job's next status and actions;
this says what each means for the tracker to do, so that the reconcile does them and decides nothing.

In order: the status written (or, unchanged, its audit record told again when it never reached the
stream); the job's ledger holding written on it once it runs; each action (a job in flight marked before
its eviction, an attempt noted before its Reservation is asked for, the executor's commands, the
cleanup, the release); the job pointed at its current Reservation; then what the tracker keeps of it (its
next look, an atomic drain waiting, the replacement it waits for).
"""

from __future__ import annotations

from dataclasses import dataclass

from services.tracker.jobs import deadlines
from services.tracker.jobs.machine import CLEANUP, EVICT, RELEASE, RESERVE, SCALE_BACK, SURGE, UNSURGE
from services.tracker.jobs.views import Observed, ReservationView, Step
from shared.api.messages import Step as CommandStep
from shared.api.names import (
    ANNOTATION_ATOMIC,
    ANNOTATION_DRAIN_NODE,
    ANNOTATION_LEDGER,
    LABEL_ATOMIC_PLAN,
)
from shared.api.pmj import (
    PHASE_PENDING,
    PHASE_RUNNING,
    REASON_WAIT_FOR_POD_BIND_RESERVATION,
    TERMINAL_PHASES,
    PodMigrationJob,
)
from shared.api.surge import is_surge


@dataclass(frozen=True)
class InFlight:
    """The job is past its eviction: its workload's room outlives it while a sibling may use it."""

    workload: str


@dataclass(frozen=True)
class Asked:
    """The attempt whose Reservation is about to be asked for (its name is read from now on)."""

    attempt: int


@dataclass(frozen=True)
class Command:
    step: CommandStep
    pod_uid: str | None
    attempt: int | None = None
    target: str | None = None  # a surge's Deployment


@dataclass(frozen=True)
class Cleanup:
    workload: str | None
    reservation: ReservationView | None
    attempts: int


@dataclass(frozen=True)
class Release:
    phase: str
    # Released without a cleanup in the same step: one it was in flight for is cleaned up first (its
    # Reservation is gone, yet the job must leave the workload's set).
    cleanup_if_in_flight: bool


Deed = InFlight | Asked | Command | Cleanup | Release


@dataclass(frozen=True)
class Plan:
    write: bool  # the status changed
    retell: bool  # unchanged, but its audit record was never acknowledged
    record_ledger: bool  # running, and what it holds in the ledger not yet written on it
    deeds: tuple[Deed, ...]
    point_at: ReservationView | None  # the Reservation the job must name now
    phase: str
    look_again_at: float | None  # None: it ended, the tracker lets it go
    atomic_drain: str | None  # the node whose atomic drain this job waits in, or `plan:` its atomic plan
    waits_in: str | None  # the workload whose replacement it waits for
    waits_no_more_in: str | None  # the workload whose replacements it no longer waits for


def plan(job: PodMigrationJob, observed: Observed, step: Step) -> Plan:
    before = job.status
    annotations = job.metadata.annotations or {}
    phase = step.status.phase or PHASE_PENDING
    current = observed.reservation
    workload = current.owner_controller_uid if current else None
    recorded = ANNOTATION_LEDGER in annotations and (not observed.surge or is_surge(annotations))
    terminal = phase in TERMINAL_PHASES
    waits = phase == PHASE_RUNNING and step.status.reason == REASON_WAIT_FOR_POD_BIND_RESERVATION
    return Plan(
        write=step.status != before,
        retell=step.status == before
        and before is not None
        and bool(before.phase)
        and before.phase != observed.audited,
        record_ledger=phase == PHASE_RUNNING and not recorded,
        deeds=_deeds(job, observed, step, phase=phase, workload=workload),
        point_at=current
        if phase == PHASE_RUNNING
        and current
        and current.ours
        and current.name != job.spec.reservation_ref_name
        else None,
        phase=phase,
        look_again_at=None if terminal else deadlines.look_again_at(observed, step.status),
        atomic_drain=_atomic_set(job)
        if not terminal and job.spec.paused and ANNOTATION_ATOMIC in annotations
        else None,
        waits_in=workload if waits else None,
        waits_no_more_in=None if waits else workload,
    )


ATOMIC_PLAN_PREFIX = "plan:"  # what a job of an atomic plan waits in (no node name has a colon)


def _atomic_set(job: PodMigrationJob) -> str:
    """What the job waits in, paused with its room: its atomic plan (`plan:NAME`), else its node's drain."""
    plan = (job.metadata.labels or {}).get(LABEL_ATOMIC_PLAN)
    if plan:
        return f"{ATOMIC_PLAN_PREFIX}{plan}"
    return (job.metadata.annotations or {}).get(ANNOTATION_DRAIN_NODE, "")


def _deeds(
    job: PodMigrationJob, observed: Observed, step: Step, *, phase: str, workload: str | None
) -> tuple[Deed, ...]:
    current = observed.reservation
    pod_uid = observed.pod.uid if observed.pod else None
    out: list[Deed] = []
    for action in step.actions:
        if action == EVICT and workload:
            out.append(InFlight(workload))
        if action == RESERVE and step.attempt > observed.asked:
            out.append(Asked(step.attempt))
        if action in (RESERVE, EVICT):
            out.append(Command(action, pod_uid, attempt=step.attempt))
        elif action in (SURGE, SCALE_BACK, UNSURGE):
            target = observed.surged.target if observed.surged else None
            uid = pod_uid or (job.spec.pod_ref.uid if job.spec.pod_ref else None)
            out.append(Command(action, uid, target=target))
        elif action == CLEANUP:
            out.append(Cleanup(workload, current, observed.asked))
        elif action == RELEASE:
            out.append(Release(phase, cleanup_if_in_flight=CLEANUP not in step.actions))
    return tuple(out)
