"""Atomic plans (`podherd rebalance --atomic`): room for every move reserved before any pod is evicted.

An atomic plan's jobs come from intents that name the plan, its size and its timeout; each is created
paused, has its room reserved at once and waits. Here, for each plan one of whose paused jobs was reconciled:
once all `size` jobs have their room, they are unpaused together (the arbitrator then paces the evictions
as for any job); if the plan's timeout (from its first job) passes first, or one of its moves can no longer
be made, every job is aborted, which releases its Reservation, and nothing was evicted.

The state is the jobs themselves (their label, their paused flag, their abort annotation), not this
process: any tracker replica finishes a step another began (`plan_rules`). A plan is its requester's: a job
another requester labelled with its name is not one of its jobs.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

import redis.asyncio as aioredis

from services.tracker.intake.plan_rules import PlanJob, plan_step
from services.tracker.intake.reserved_ahead import announce, patch_job, room_of
from services.tracker.keys import TrackerKeys
from shared.api import paths
from shared.api.drain import MOVING, RESERVING
from shared.api.names import (
    ANNOTATION_ABORT,
    ANNOTATION_ATOMIC_SIZE,
    ANNOTATION_ATOMIC_TIMEOUT,
    ANNOTATION_REQUESTER,
    LABEL_ATOMIC_PLAN,
)
from shared.api.pmj import TERMINAL_PHASES
from shared.core.durations import parse_duration
from shared.kube.client import KubeClient
from shared.nats import bus
from shared.nats.publisher import Publisher


class AtomicPlans:
    def __init__(
        self,
        client: aioredis.Redis,
        keys: TrackerKeys,
        kube: KubeClient,
        *,
        publisher: Publisher,
        subjects: bus.Subjects,
    ) -> None:
        self.client, self.keys, self.kube = client, keys, kube
        self.publisher, self.subjects = publisher, subjects

    async def settle(self, plan: str) -> None:
        """One look at an atomic plan: its next step, carried out on every job that has not taken it."""
        found = one_requesters(await self.kube.list_items(paths.JOBS, f"{LABEL_ATOMIC_PLAN}={plan}"))
        if not found:
            await self.client.srem(self.keys.atomic_plans, plan)
            return
        jobs = [await self._view(job) for job in found]
        annotations = (found[0].get("metadata") or {}).get("annotations") or {}
        size = int(annotations.get(ANNOTATION_ATOMIC_SIZE) or len(found))
        first = min(_created(job) for job in found)
        deadline = first + parse_duration(annotations.get(ANNOTATION_ATOMIC_TIMEOUT) or "5m")
        phase, no_room = plan_step(jobs, size=size, deadline=deadline, now=time.time())
        if phase == RESERVING:
            return
        changed = 0
        for job, view in zip(found, jobs, strict=True):
            if (job.get("status") or {}).get("phase") in TERMINAL_PHASES:
                continue
            if phase == MOVING and view.paused:
                changed += await self._patch(view.name, {"spec": {"paused": False}})
            elif phase != MOVING and not view.aborted:
                lacking = "; ".join(no_room) or "another of its moves"
                why = f"atomic plan {plan} rolled back: no room for {lacking}"
                changed += await self._patch(
                    view.name, {"metadata": {"annotations": {ANNOTATION_ABORT: why}}}
                )
        if changed:
            await self._audit(plan, phase, no_room)
        await self.client.srem(self.keys.atomic_plans, plan)

    async def _view(self, job: dict[str, Any]) -> PlanJob:
        meta, spec, status = job.get("metadata") or {}, job.get("spec") or {}, job.get("status") or {}
        name = meta.get("name") or ""
        ended = status.get("phase") in TERMINAL_PHASES
        return PlanJob(
            name=name,
            room=await room_of(self.kube, name, job),
            paused=bool(spec.get("paused")),
            aborted=ANNOTATION_ABORT in (meta.get("annotations") or {}),
            failed=(status.get("message") or status.get("phase")) if ended and spec.get("paused") else None,
        )

    async def _patch(self, job: str, patch: dict[str, Any]) -> int:
        return 1 if await patch_job(self.kube, job, patch) else 0

    async def _audit(self, plan: str, phase: str, no_room: list[str]) -> None:
        await announce(self.publisher, self.subjects, of="plan", name=plan, phase=phase, no_room=no_room)


def one_requesters(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A plan's jobs are its requester's: those of the requester of its first job. A job someone else
    labelled with the plan's name is not counted, waited for or rolled back with it."""
    if not jobs:
        return []

    def requester(job: dict[str, Any]) -> str | None:
        return ((job.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_REQUESTER)

    owner = requester(min(jobs, key=_created))
    return [job for job in jobs if requester(job) == owner]


def _created(job: dict[str, Any]) -> float:
    stamp = str((job.get("metadata") or {}).get("creationTimestamp") or "")
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return time.time()
