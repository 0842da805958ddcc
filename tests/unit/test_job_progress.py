"""The job lifecycle as a pure function of what is observed: table-driven, no servers."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest

from podherd.watchdog.timeouts import timed_out, why_timed_out
from services.tracker.jobs.machine import (
    CLEANUP,
    EVICT,
    RELEASE,
    RESERVE,
    Observed,
    PodView,
    ReservationView,
    progress,
)
from shared.api.codec import to_builtins
from shared.api.meta import ObjectMeta, ObjectReference
from shared.api.names import ANNOTATION_REQUESTER
from shared.api.pmj import PodMigrationJob, PodMigrationJobSpec, PodMigrationJobStatus

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
POD = PodView("default", "web-0", "pod-uid", "node-1", terminating=False, ready=True, controller_uid="rs-1")


def job(**spec: Any) -> PodMigrationJob:
    annotations = spec.pop("annotations", {})
    return PodMigrationJob(
        metadata=ObjectMeta(
            name="j", uid="j-uid", creation_timestamp=NOW - timedelta(seconds=10), annotations=annotations
        ),
        spec=PodMigrationJobSpec(pod_ref=ObjectReference(namespace="default", name="web-0"), **spec),
    )


def seen(**changes: Any) -> Observed:
    base = Observed(
        job=job(),
        now=NOW,
        admitted=True,
        rejection=None,
        pod=POD,
        reservation=None,
        bound_pod=None,
        replacement=None,
        eviction_note=None,
        reserve_failed=None,
        default_mode="ReservationFirst",
        default_ttl="5m",
    )
    return replace(base, **changes)


def reservation(phase: str = "Available", node: str | None = "node-2", **extra: Any) -> ReservationView:
    return ReservationView(
        name="j",
        phase=phase,
        node=node,
        unschedulable=extra.get("unschedulable"),
        failed_reason=extra.get("failed_reason"),
        owner_controller_uid="rs-1",
        bound=extra.get("bound", ()),
    )


def then(o: Observed) -> Observed:
    """The next observation of the same job, with the status just decided written."""
    return replace(
        o, job=PodMigrationJob(metadata=o.job.metadata, spec=o.job.spec, status=progress(o).status)
    )


GONE = replace(POD, terminating=True)
NEW = PodView("default", "web-9", "new-uid", "node-2", terminating=False, ready=True, controller_uid="rs-1")


@pytest.mark.parametrize(
    ("observed", "phase", "reason", "actions"),
    [
        (seen(admitted=False), "Pending", None, ()),
        (seen(admitted=False, job=job(paused=True)), "Pending", None, ()),
        (
            seen(rejection=("ForbiddenMigratePod", "EvictionCost: ...")),
            "Failed",
            "ForbiddenMigratePod",
            (RELEASE,),
        ),
        (seen(job=job(annotations={"podherd.io/abort": "no"})), "Aborted", "Aborted", (RELEASE,)),
        (seen(job=job(ttl="5s")), "Failed", "Timeout", (RELEASE,)),
        (seen(job=job(ttl="5s"), reservation=reservation()), "Failed", "Timeout", (CLEANUP, RELEASE)),
        (seen(pod=None), "Failed", "MissingPod", (RELEASE,)),
        (seen(pod=None, admitted=False), "Failed", "MissingPod", (RELEASE,)),  # the tracker reads the pod
        (seen(), "Running", None, (RESERVE,)),
        (seen(reserve_failed="quota"), "Failed", "FailedCreateReservation", (RELEASE,)),
        # The API server away: tried again (Koordinator's way), the condition False, until the ttl.
        (seen(reserve_retrying="503 Service Unavailable"), "Running", None, (RESERVE,)),
        (seen(reservation=reservation("Pending", None)), "Running", None, ()),
        # Koordinator's: a Pending Reservation the scheduler cannot place yet is waited for (until the ttl);
        # one that Failed without expiring could not be placed.
        (seen(reservation=reservation("Pending", None, unschedulable="0/3 nodes")), "Running", None, ()),
        (
            seen(reservation=reservation("Failed", None, unschedulable="0/3 nodes", failed_reason="x")),
            "Failed",
            "Unschedulable",
            (CLEANUP, RELEASE),
        ),
        (
            seen(reservation=reservation("Failed", None, failed_reason="Expired")),
            "Failed",
            "ReservationExpired",
            (CLEANUP, RELEASE),
        ),
        (seen(reservation=reservation(node="node-1")), "Failed", "ForbiddenMigratePod", (CLEANUP, RELEASE)),
        (
            seen(reservation=reservation("Succeeded", bound=(("default", "other", "x"),))),
            "Failed",
            "ForbiddenMigratePod",
            (CLEANUP, RELEASE),
        ),
        (seen(reservation=reservation()), "Running", "Evicting", (EVICT,)),
        (seen(dry_run=True), "Succeeded", "DryRun", (RELEASE,)),
        (seen(job=job(mode="EvictDirectly")), "Running", "Evicting", (EVICT,)),
    ],
)
def test_one_step(observed: Observed, phase: str, reason: str | None, actions: tuple[str, ...]) -> None:
    step = progress(observed)
    assert (step.status.phase, step.status.reason, step.actions) == (phase, reason, actions)


def test_reservation_first_to_the_end_and_idempotent() -> None:
    o = seen()
    o = then(o)  # reserve asked
    o = then(replace(o, reservation=reservation()))  # evict asked
    conditions = {c.type: c.status for c in o.job.status.conditions or []}  # type: ignore[union-attr]
    assert conditions == {"ReservationCreated": "True", "ReservationScheduled": "True", "Eviction": "False"}
    o = then(replace(o, pod=GONE))
    assert o.job.status is not None and o.job.status.reason == "WaitForPodBindReservation"
    bound = reservation("Succeeded", bound=(("default", "web-9", "new-uid"),))
    claimed = ("default", "web-9", "new-uid")
    o = then(replace(o, pod=None, reservation=bound, claimed=claimed, replacement=replace(NEW, ready=False)))
    assert o.job.status is not None and o.job.status.reason == "WaitForBoundPodReady"
    last = replace(o, replacement=NEW)
    step = progress(last)
    assert (step.status.phase, step.status.status, step.status.node_name) == (
        "Succeeded",
        "Complete",
        "node-2",
    )
    assert step.status.pod_ref is not None and step.status.pod_ref.name == "web-9"
    assert step.actions == (CLEANUP, RELEASE)
    # The same observation again changes nothing (a replayed event, another replica).
    done = then(last)
    assert progress(done).status == done.job.status


def test_a_pod_gone_after_the_eviction_is_not_missing_and_times_are_kept() -> None:
    o = then(then(replace(seen(), reservation=reservation())))
    evicting = next(c for c in o.job.status.conditions or [] if c.type == "Eviction")  # type: ignore[union-attr]
    later = replace(o, now=NOW + timedelta(seconds=3), pod=None)
    step = progress(later)
    assert step.status.phase == "Running"  # not MissingPod: the job evicted it
    eviction = next(c for c in step.status.conditions or [] if c.type == "Eviction")
    assert eviction.status == "True" and eviction.last_transition_time == NOW + timedelta(seconds=3)
    created = next(c for c in step.status.conditions or [] if c.type == "ReservationCreated")
    assert created.last_transition_time == NOW  # unchanged status: unchanged time
    assert evicting.last_transition_time == NOW


def test_a_reservation_taken_by_a_sibling_replacement_is_made_again() -> None:
    taken = reservation("Succeeded", bound=(("default", "web-9", "new-uid"),))
    step = progress(seen(reservation=taken, bound_pod=NEW, attempt=1))
    assert (step.status.phase, step.actions, step.attempt) == ("Running", (RESERVE,), 2)
    stranger = replace(NEW, controller_uid="someone-else")
    assert progress(seen(reservation=taken, bound_pod=stranger)).status.reason == "ForbiddenMigratePod"


def test_a_pdb_refusal_is_in_the_eviction_condition() -> None:
    o = seen(reservation=reservation(), eviction_note="The disruption budget web needs 3 healthy pods")
    eviction = next(c for c in progress(o).status.conditions or [] if c.type == "Eviction")
    assert "disruption budget web" in (eviction.message or "")


def test_terminal_jobs_only_clean_up() -> None:
    finished = job()
    finished.status = PodMigrationJobStatus(phase="Succeeded", status="Complete")
    assert progress(seen(job=finished, reservation=reservation())).actions == (CLEANUP, RELEASE)
    assert progress(seen(job=finished)).status == finished.status


def test_a_pending_pod_is_not_evicted_it_schedules_into_the_room() -> None:
    pending = replace(POD, node=None, ready=False)
    waiting = progress(seen(pod=pending, reservation=reservation()))
    assert (waiting.status.phase, waiting.status.reason, waiting.actions) == (
        "Running",
        "WaitForPodBindReservation",
        (),
    )
    took = reservation("Succeeded", bound=(("default", "web-0", "pod-uid"),))
    bound = replace(pending, node="node-2")
    done = progress(seen(pod=bound, reservation=took, bound_pod=bound))
    assert (done.status.phase, done.status.node_name) == ("Succeeded", "node-2")
    assert done.status.pod_ref is not None and done.status.pod_ref.uid == "pod-uid"


STUCK = replace(POD, terminating=True, deleted_at=NOW - timedelta(seconds=4), node_ready=False)


def evicted(o: Observed) -> Observed:
    """`o` after its eviction was asked for (the Eviction condition is there)."""
    return then(o)


def test_evict_directly_is_not_succeeded_while_the_old_pod_still_exists() -> None:
    o = evicted(seen(job=job(mode="EvictDirectly")))
    waiting = progress(replace(o, pod=STUCK))
    assert (waiting.status.phase, waiting.actions) == ("Running", ())  # nothing released yet
    assert waiting.status.message == (
        "evicted; waiting until it is gone: pod default/web-0 is terminating on node node-1 (NotReady: its "
        "kubelet cannot finish it); its grace period ends 2026-11-22T11:59:56Z"
    )
    done = progress(replace(o, pod=None))
    assert (done.status.phase, done.actions) == ("Succeeded", (RELEASE,))


def test_a_job_whose_old_pod_never_goes_times_out_naming_it() -> None:
    o = evicted(seen(job=job(mode="EvictDirectly", ttl="15s")))  # created 10 s ago
    step = progress(replace(o, pod=STUCK, now=NOW + timedelta(seconds=6)))
    assert (step.status.phase, step.status.reason, step.actions) == ("Failed", "Timeout", (RELEASE,))
    assert "pod default/web-0 is terminating" in (step.status.message or "")
    assert "node node-1 (NotReady" in (step.status.message or "")


def test_reservation_first_waits_for_the_old_pod_even_with_its_replacement_ready() -> None:
    bound = reservation("Succeeded", bound=(("default", "web-9", "new-uid"),))
    claimed = ("default", "web-9", "new-uid")
    o = evicted(seen(reservation=reservation()))
    o = replace(o, pod=replace(STUCK, node_ready=True), reservation=bound, claimed=claimed, replacement=NEW)
    waiting = progress(o)
    assert (waiting.status.phase, waiting.actions) == ("Running", ())
    assert "web-9 is Ready; waiting: pod default/web-0 is terminating" in (waiting.status.message or "")
    assert "NotReady" not in (waiting.status.message or "")
    assert progress(replace(o, pod=None)).status.phase == "Succeeded"


@pytest.mark.parametrize("mode", ["ReservationFirst", "EvictDirectly"])
def test_a_pod_deleted_outright_by_others_while_its_eviction_waits_is_missing_not_moved(mode: str) -> None:
    """Its eviction asked for and not done yet, the pod is deleted outright (its controller scaling down,
    no DisruptionTarget); a pod of the scale-up takes the room. The job did not move it."""
    bound = reservation("Succeeded", bound=(("default", "web-9", "new-uid"),))
    o = evicted(seen(job=job(mode=mode), reservation=reservation()))
    o = replace(o, pod=None, reservation=bound, claimed=("default", "web-9", "new-uid"), replacement=NEW)
    assert progress(o).status.phase == "Succeeded"  # evicted (or nothing known of how it went): a move
    step = progress(replace(o, deleted_by_others=True))
    assert (step.status.phase, step.status.reason) == ("Failed", "MissingPod")
    assert step.status.message == "default/web-0 was deleted by others before its eviction"
    assert RELEASE in step.actions


def test_a_reservation_taken_while_the_eviction_waits_is_made_again_or_fails_if_named() -> None:
    # The eviction was asked for (a budget refused it) and the pod is still there: not evicted yet.
    o = evicted(seen(reservation=reservation(), eviction_note="The disruption budget web needs 3"))
    taken = reservation("Succeeded", bound=(("default", "web-9", "new-uid"),))
    step = progress(replace(o, reservation=taken, bound_pod=NEW, attempt=1))
    assert (step.status.phase, step.actions, step.attempt) == ("Running", (RESERVE,), 2)
    assert "taken by default/web-9 of the same workload; reserving again" in (step.status.message or "")
    named = replace(taken, ours=False)  # one the user named is not made again: as Koordinator, forbidden
    failed = progress(replace(o, reservation=named, bound_pod=NEW))
    assert (failed.status.phase, failed.status.reason) == ("Failed", "ForbiddenMigratePod")


# ---------------------------------------------------------------------------------------------------------
# Why a job timed out, read back from the status it ended with


def ended_by_ttl(o: Observed) -> dict[str, Any]:
    """Play `o` until it stays where it is, then let its ttl pass; the job as the API server holds it."""
    for _ in range(6):
        o = then(o)
    late = progress(replace(o, now=NOW + timedelta(minutes=10)))
    assert (late.status.phase, late.status.reason) == ("Failed", "Timeout")
    assert late.status.message != progress(o).status.message  # it names what it waited for
    job_then = PodMigrationJob(metadata=o.job.metadata, spec=o.job.spec, status=late.status)
    return cast(dict[str, Any], to_builtins(job_then))


PDB_NOTE = "Cannot evict pod as it would violate the pod's disruption budget."


@pytest.mark.parametrize(
    ("observed", "cause"),
    [
        (seen(reservation=None), "ReservationCreated: the Reservation was not created"),
        (
            seen(reservation=reservation("Pending", None)),
            "ReservationScheduled: the Reservation was not scheduled",
        ),
        (
            seen(reservation=reservation(), eviction_note=PDB_NOTE),
            "Eviction: refused by a PodDisruptionBudget",
        ),
        (
            seen(reservation=reservation(), eviction_note="not evicting: Reservation j is bound to web-3"),
            "Eviction: no room to evict into",
        ),
        (seen(reservation=reservation()), "Eviction: asked for, never confirmed by the executor"),
        (
            evicted(seen(reservation=reservation(), pod=GONE)),
            "PodBoundReservation: no replacement bound the Reservation",
        ),
        (
            replace(
                evicted(seen(reservation=reservation(), pod=GONE)),
                pod=None,
                claimed=("default", "web-9", "new-uid"),
                replacement=replace(NEW, ready=False),
            ),
            "BoundPodReady: the replacement did not become Ready",
        ),
        (
            evicted(seen(job=job(mode="EvictDirectly"), pod=STUCK)),
            "Eviction: the old pod was stuck terminating",
        ),
    ],
)
def test_a_timed_out_job_says_what_it_waited_for(observed: Observed, cause: str) -> None:
    ended = ended_by_ttl(observed)
    assert timed_out(ended)
    assert why_timed_out(ended, last_deferral=None, default_mode="ReservationFirst") == cause


def test_a_job_never_admitted_is_explained_by_the_arbitrators_last_deferral() -> None:
    ended = ended_by_ttl(seen(admitted=False))
    assert "waiting for admission" in ended["status"]["message"]
    rule = "maxMigratingPerNode: node-1 has 2 of 2 migrations in flight"
    assert why_timed_out(ended, rule, "ReservationFirst") == f"Admission: deferred ({rule})"
    assert why_timed_out(ended, None, "ReservationFirst") == "unknown"


def test_a_job_admitted_late_is_explained_by_its_wait_for_admission() -> None:
    rule = "deferred: PodDisruptionBudget 0/0 on PodDisruptionBudget default/web"
    late = ended_by_ttl(seen(job=job(ttl="15s")))  # its first condition 10 s after its creation
    assert why_timed_out(late, rule, "ReservationFirst") == f"Admission: deferred ({rule})"
    assert (
        why_timed_out(late, None, "ReservationFirst") == "ReservationCreated: the Reservation was not created"
    )
    early = ended_by_ttl(seen(job=job(ttl="60s")))
    assert (
        why_timed_out(early, rule, "ReservationFirst")
        == "ReservationCreated: the Reservation was not created"
    )


def test_a_waiting_job_says_who_asked_for_it_where_podherd_verified_it() -> None:
    verified = job(annotations={"podherd.io/requester": "system:serviceaccount:tools:defrag"})
    message = progress(seen(admitted=False, job=verified)).status.message or ""
    assert message.endswith("; requested by system:serviceaccount:tools:defrag"), message
    claimed = job(annotations={"podherd.io/claimed-requester": "anyone"})
    assert "requested by" not in (progress(seen(admitted=False, job=claimed)).status.message or "")


def test_a_job_waiting_for_admission_says_what_the_arbitrator_said_it_waits_for() -> None:
    held = "PodDisruptionBudget 0/0 on PodDisruptionBudget default/web"
    waiting = progress(
        seen(admitted=False, deferral=held, job=job(annotations={ANNOTATION_REQUESTER: "ann"}))
    )
    assert waiting.status.phase == "Pending"
    assert waiting.status.message == f"waiting for admission: {held}; requested by ann"
    # Before the arbitrator said anything, the status says where to look.
    assert (
        progress(seen(admitted=False)).status.message == "waiting for admission (the arbitrator audits why)"
    )


def test_a_paused_job_is_left_as_it_is_its_ttl_too_until_its_pod_was_asked_to_go() -> None:
    """Koordinator's: `spec.paused` freezes a job in any phase, before its ttl is looked at."""
    past_ttl = NOW + timedelta(hours=1)
    for admitted in (False, True):
        step = progress(seen(job=job(paused=True, ttl="1m"), admitted=admitted, now=past_ttl, pod=None))
        assert (step.status.phase, step.actions) == ("Pending", ()), step
        assert step.status.message == "paused: the job waits until spec.paused is false"
    resumed = progress(seen(job=job(paused=False, ttl="1m"), now=past_ttl))
    assert (resumed.status.phase, resumed.status.reason) == ("Failed", "Timeout")
