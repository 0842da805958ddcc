"""What carrying out a step takes (`services.tracker.jobs.deeds`), in the order the reconcile does it: the
machine decides, the plan says what that means to do, the reconcile decides nothing."""

from __future__ import annotations

from dataclasses import replace

import msgspec

from services.tracker.jobs import deeds
from services.tracker.jobs.machine import progress
from services.tracker.jobs.views import Step
from shared.api.names import ANNOTATION_ATOMIC, ANNOTATION_DRAIN_NODE, ANNOTATION_LEDGER
from shared.api.pmj import PodMigrationJob, PodMigrationJobStatus
from tests.unit.test_job_progress import GONE, job, reservation, seen, then


def test_a_new_job_is_admitted_reserves_and_notes_its_attempt_before_asking() -> None:
    first = seen()
    step = progress(first)
    todo = deeds.plan(first.job, first, step)
    assert todo.write and not todo.retell
    assert todo.deeds[:2] == (deeds.Asked(1), deeds.Command("reserve", "pod-uid", attempt=1))
    assert todo.record_ledger  # running, its holding not yet on the PMJ
    again = then(first)
    meta = msgspec.structs.replace(again.job.metadata, annotations={ANNOTATION_LEDGER: "x"})
    recorded = replace(again, job=msgspec.structs.replace(again.job, metadata=meta))
    assert not deeds.plan(recorded.job, recorded, progress(recorded)).record_ledger


def test_an_eviction_marks_the_job_in_flight_for_its_workload_first() -> None:
    o = then(seen(reservation=reservation()))
    step = progress(o)
    todo = deeds.plan(o.job, o, step)
    assert deeds.InFlight("rs-1") in todo.deeds
    assert todo.deeds.index(deeds.InFlight("rs-1")) < todo.deeds.index(
        deeds.Command("evict", "pod-uid", attempt=1)
    )


def test_an_unchanged_status_whose_audit_record_was_lost_is_told_again() -> None:
    o = then(seen(reservation=reservation()))
    o = then(o)
    status = o.job.status
    assert status is not None
    lost = replace(o, audited=None)
    unchanged = Step(status)
    todo = deeds.plan(lost.job, lost, unchanged)
    assert (todo.write, todo.retell) == (False, True)
    told = replace(o, audited=status.phase)
    assert not deeds.plan(told.job, told, unchanged).retell


def test_a_release_without_cleanup_cleans_up_first_if_it_was_in_flight() -> None:
    o = seen(reservation=None)
    step = Step(PodMigrationJobStatus(phase="Failed", reason="Aborted"), actions=("release",))
    (release,) = deeds.plan(o.job, o, step).deeds
    assert release == deeds.Release("Failed", cleanup_if_in_flight=True)
    both = Step(PodMigrationJobStatus(phase="Failed", reason="Aborted"), actions=("cleanup", "release"))
    assert deeds.plan(o.job, o, both).deeds[-1] == deeds.Release("Failed", cleanup_if_in_flight=False)


def test_an_ended_job_is_let_go_and_a_paused_atomic_one_waits_in_its_drain() -> None:
    o = seen(pod=GONE)
    ended = Step(PodMigrationJobStatus(phase="Succeeded"))
    assert deeds.plan(o.job, o, ended).look_again_at is None
    drained: PodMigrationJob = job(
        paused=True, annotations={ANNOTATION_ATOMIC: "true", ANNOTATION_DRAIN_NODE: "n1"}
    )
    waiting = replace(o, job=drained)
    todo = deeds.plan(drained, waiting, progress(waiting))
    assert todo.atomic_drain == "n1" and todo.look_again_at is not None
