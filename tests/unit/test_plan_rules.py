"""An atomic plan's next step (services.tracker.intake.plan_rules): move once every one of its moves has
room, roll back when its timeout passes first or one move can no longer be made, and finish a step another
replica began."""

from __future__ import annotations

from typing import Any

from services.tracker.intake.atomic_plans import one_requesters
from services.tracker.intake.plan_rules import PlanJob, plan_step
from shared.api.names import ANNOTATION_REQUESTER
from shared.intake.drain_plan import Room


def job(
    pod: str, *, placed: bool, paused: bool = True, aborted: bool = False, failed: str | None = None
) -> PlanJob:
    return PlanJob(
        f"job-{pod}",
        Room(f"default/{pod}", placed=placed, why="" if placed else "0/3 nodes"),
        paused,
        aborted,
        failed,
    )


def test_moves_once_every_move_has_room_and_all_have_arrived() -> None:
    both = [job("a", placed=True), job("b", placed=True)]
    assert plan_step(both, size=2, deadline=100, now=50) == ("Moving", [])
    # One move's intent not yet made into a job: wait for it, as long as the timeout allows.
    assert plan_step(both, size=3, deadline=100, now=50) == ("Reserving", [])
    assert plan_step([job("a", placed=True), job("b", placed=False)], size=2, deadline=100, now=50) == (
        "Reserving",
        [],
    )


def test_the_timeout_rolls_back_naming_each_move_without_room() -> None:
    phase, why = plan_step([job("a", placed=True), job("b", placed=False)], size=3, deadline=100, now=101)
    assert phase == "RolledBack"
    assert why == ["default/b: 0/3 nodes", "1 of its 3 moves never arrived"]


def test_a_move_that_ended_rolls_the_plan_back_at_once() -> None:
    jobs = [job("a", placed=True), job("b", placed=True, failed="the pod is gone")]
    assert plan_step(jobs, size=2, deadline=100, now=0) == ("RolledBack", ["default/b: the pod is gone"])


def test_a_step_begun_is_finished() -> None:
    unpaused = [job("a", placed=True, paused=False), job("b", placed=False)]
    assert plan_step(unpaused, size=2, deadline=100, now=200)[0] == "Moving"
    aborted = [job("a", placed=True, aborted=True), job("b", placed=True)]
    assert plan_step(aborted, size=2, deadline=100, now=0)[0] == "RolledBack"


def test_a_plan_is_its_first_requesters_and_a_job_another_labelled_with_it_is_left_out() -> None:
    def job(name: str, at: str, requester: str) -> dict[str, Any]:
        meta = {"name": name, "creationTimestamp": at, "annotations": {ANNOTATION_REQUESTER: requester}}
        return {"metadata": meta}

    jobs = [
        job("intruder", "2026-11-29T10:00:05Z", "mallory"),
        job("b", "2026-11-29T10:00:01Z", "planner"),
        job("a", "2026-11-29T10:00:00Z", "planner"),
    ]
    assert [j["metadata"]["name"] for j in one_requesters(jobs)] == ["b", "a"]
    assert one_requesters([]) == []
