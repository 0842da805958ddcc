"""An atomic plan's next step (pure): its jobs wait paused, each with its room reserved; the plan moves once
every one of its `size` jobs has room, and is rolled back (every job aborted, every room released, nothing
evicted) once its timeout passes first or one of its moves can no longer be made. A step already begun is
finished: a plan with a job unpaused moves, one with a job aborted is rolled back, whichever replica
looked first."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from shared.api.drain import MOVING, RESERVING, ROLLED_BACK
from shared.intake.drain_plan import Room


@dataclass(frozen=True)
class PlanJob:
    name: str
    room: Room
    paused: bool
    aborted: bool  # it carries the abort annotation
    failed: str | None = None  # it ended without moving its pod: why


def plan_step(jobs: Sequence[PlanJob], *, size: int, deadline: float, now: float) -> tuple[str, list[str]]:
    """The plan's phase now, and while rolling back, each move without room and why."""
    if any(j.aborted for j in jobs):
        return ROLLED_BACK, []
    if any(not j.paused for j in jobs):
        return MOVING, []
    failed = [f"{j.room.pod}: {j.failed}" for j in jobs if j.failed]
    if failed:
        return ROLLED_BACK, failed
    if len(jobs) >= size and all(j.room.placed for j in jobs):
        return MOVING, []
    if now < deadline:
        return RESERVING, []
    why = [f"{j.room.pod}: {j.room.why or 'no room found'}" for j in jobs if not j.room.placed]
    if len(jobs) < size:
        why.append(f"{size - len(jobs)} of its {size} moves never arrived")
    return ROLLED_BACK, why
