"""Surge as the state machine decides it, step by step, and what the arbitrator charges a surging job."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import msgspec
import pytest

from services.arbitrator.rules import limits
from services.tracker.jobs.machine import CLEANUP, RELEASE, RESERVE, SCALE_BACK, SURGE, UNSURGE, progress
from shared.api.messages import JobRef, Report
from shared.rules import filters
from shared.rules.facts import PdbFacts, WorkloadFacts
from tests.unit.test_arbitration_rules import JOB, POD, args
from tests.unit.test_job_progress import NEW, job, reservation, seen, then
from tests.unit.test_job_progress import POD as OLD

SURGING = {"podherd.io/strategy": "Surge"}
TAKEN = reservation("Succeeded", bound=(("default", "web-9", "new-uid"),))
CLAIMED = ("default", "web-9", "new-uid")


def report(step: str, outcome: str, message: str = "m") -> Report:
    return Report(
        job=JobRef(name="j", uid="j-uid"),
        step=step,  # type: ignore[arg-type]
        outcome=outcome,  # type: ignore[arg-type]
        message=message,
        target="default/web",
        reported_at=datetime(2026, 11, 25, tzinfo=UTC),
    )


@pytest.mark.parametrize(
    ("changes", "phase", "reason", "actions"),
    [
        ({}, "Running", None, (RESERVE,)),  # room first, as ReservationFirst
        ({"reservation": reservation()}, "Running", "Surging", (SURGE,)),
        # Scaled up, its pod not in the room yet.
        (
            {"reservation": reservation(), "surged": report("surge", "done")},
            "Running",
            "WaitForPodBindReservation",
            (),
        ),
        # The new pod took the job's own Reservation before the old one went: the surge, not a sibling.
        (
            {
                "reservation": TAKEN,
                "surged": report("surge", "done"),
                "claimed": CLAIMED,
                "replacement": replace(NEW, ready=False),
            },
            "Running",
            "WaitForBoundPodReady",
            (),
        ),
        (
            {"reservation": TAKEN, "surged": report("surge", "done"), "claimed": CLAIMED, "replacement": NEW},
            "Running",
            "Evicting",
            (SCALE_BACK,),
        ),
        (
            {
                "reservation": TAKEN,
                "claimed": CLAIMED,
                "replacement": NEW,
                "pod": replace(OLD, terminating=True),
            },
            "Running",
            None,
            (),
        ),
        (
            {"reservation": reservation(), "surged": report("surge", "failed", "HPA")},
            "Failed",
            "SurgeFailed",
            (CLEANUP, RELEASE, UNSURGE),
        ),
        (
            {
                "reservation": TAKEN,
                "claimed": CLAIMED,
                "replacement": NEW,
                "scaled_back": report("scale-back", "failed"),
            },
            "Failed",
            "SurgeFailed",
            (CLEANUP, RELEASE, UNSURGE),
        ),
    ],
)
def test_a_surge_step_by_step(
    changes: dict[str, object], phase: str, reason: str | None, actions: tuple[str, ...]
) -> None:
    step = progress(seen(surge=True, **changes))
    assert (step.status.phase, step.status.reason, step.actions) == (phase, reason, actions)


def test_the_old_pod_gone_after_the_scale_down_ends_the_surge_succeeded() -> None:
    scaling_back = seen(
        surge=True, reservation=TAKEN, surged=report("surge", "done"), claimed=CLAIMED, replacement=NEW
    )
    assert progress(scaling_back).actions == (SCALE_BACK,)
    gone = replace(then(scaling_back), pod=None)
    step = progress(gone)
    assert (step.status.phase, step.actions) == ("Succeeded", (CLEANUP, RELEASE, UNSURGE))
    assert step.status.message == "moved to web-9 on node-2 by a surge"
    # Gone before the scale-down was asked for: not this surge's doing.
    assert progress(replace(scaling_back, pod=None)).status.reason == "MissingPod"


def test_every_ending_of_a_surging_job_takes_back_what_the_surge_added() -> None:
    timed_out = seen(surge=True, reservation=reservation(), job=job(ttl="1s"))
    assert (progress(timed_out).status.reason, progress(timed_out).actions) == (
        "Timeout",
        (CLEANUP, RELEASE, UNSURGE),
    )


def test_a_surging_job_is_charged_one_replica_more() -> None:
    workload = WorkloadFacts(key="Deployment/default/web", replicas=1)
    pdb = PdbFacts(key="default/web", disruptions_allowed=0)
    config = args(maxUnavailablePerWorkload=1, maxMigratingPerWorkload=1)
    plain = limits.plan(JOB, POD, workload, pdbs=[pdb], args=config)
    surging = limits.plan(msgspec.structs.replace(JOB, surge=True), POD, workload, pdbs=[pdb], args=config)
    ceilings = {s.rule: s.limit for s in plain.slots}
    surged = {s.rule: s.limit for s in surging.slots}
    assert ceilings["PodDisruptionBudget"] == 0 and surged["PodDisruptionBudget"] == 1
    unavailable = next(s for s in surging.slots if s.rule == "maxUnavailablePerWorkload")
    assert unavailable.replicas == 1  # the pods expected stay what they are
    # A single replica is refused unless it surges (it keeps its replica throughout).
    assert filters.evaluate(JOB, POD, workload, args=args()) is not None
    assert filters.evaluate(msgspec.structs.replace(JOB, surge=True), POD, workload, args=args()) is None


@pytest.mark.parametrize(
    ("switches", "mode", "kind", "replicas", "pdbs", "surges"),
    [
        ({}, "ReservationFirst", "Deployment", 1, [0], False),  # off by default
        ({"singleReplicaDeployments": True}, "ReservationFirst", "Deployment", 1, [], True),
        ({"singleReplicaDeployments": True}, "ReservationFirst", "Deployment", 2, [], False),
        ({"zeroDisruptionDeployments": True}, "ReservationFirst", "Deployment", 3, [1, 0], True),
        ({"zeroDisruptionDeployments": True}, "ReservationFirst", "Deployment", 3, [1], False),
        ({"singleReplicaDeployments": True}, "ReservationFirst", "StatefulSet", 1, [], False),
        ({"singleReplicaDeployments": True}, "EvictDirectly", "Deployment", 1, [], False),
    ],
)
def test_the_arbitrator_chooses_surge_where_its_switches_say(
    switches: dict[str, bool], mode: str, kind: str, replicas: int, pdbs: list[int], surges: bool
) -> None:
    workload = WorkloadFacts(key=f"{kind}/default/web", replicas=replicas)
    facts = msgspec.structs.replace(JOB, mode=mode)
    assert filters.surges(facts, workload, pdbs=pdbs, args=args(surge=switches)) is surges


def test_a_drains_job_surges_where_its_workload_cannot_spare_the_pod_whatever_the_switches() -> None:
    drain = msgspec.structs.replace(JOB, drain=True)
    single = WorkloadFacts(key="Deployment/default/web", replicas=1)
    spread = WorkloadFacts(key="Deployment/default/web", replicas=3)
    assert filters.surges(drain, single, pdbs=[], args=args())
    assert filters.surges(drain, spread, pdbs=[0], args=args())
    assert not filters.surges(drain, spread, pdbs=[1], args=args())
