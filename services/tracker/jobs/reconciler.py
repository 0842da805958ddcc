"""The job reconciler: one job read, decided by the machine and carried out, under the job's lock.

`_reconcile_once` decides nothing itself: it reads the job (`observer`), asks the machine for the next status
and actions (`machine.progress`), turns them into what must be done (`deeds.plan`), and does it: the status
written with optimistic concurrency (a 409 reads and decides again), the commands sent, the ledger released.
"""

from __future__ import annotations

import asyncio
from typing import NamedTuple, cast

import msgspec
import redis.asyncio as aioredis

from services.tracker.jobs import deeds, machine
from services.tracker.jobs.effects import Effects
from services.tracker.jobs.endings import Endings
from services.tracker.jobs.locks import JobLocks
from services.tracker.jobs.observer import Observer
from services.tracker.jobs.state import STALE, JobState
from services.tracker.keys import TrackerKeys
from shared.api import codec, paths
from shared.api.pmj import PHASE_PENDING, Phase, PodMigrationJob
from shared.api.pmj_read import read_pmj
from shared.kube.client import KubeClient, KubeError
from shared.nats.consume import Retry
from shared.service.logs import about_job

LOCK_MS = 15_000
# How long a reconcile waits for another one of the same job to end before handing its message back.
LOCK_WAIT = 1.0


class JobParts(NamedTuple):
    """What a reconcile works with: how it reads a job, what it keeps, does, ends with, and locks."""

    observer: Observer
    state: JobState
    effects: Effects
    endings: Endings
    locks: JobLocks


class Reconciler:
    def __init__(
        self, client: aioredis.Redis, keys: TrackerKeys, kube: KubeClient, *, parts: JobParts
    ) -> None:
        self.client, self.keys, self.kube, self.parts = client, keys, kube, parts

    async def reconcile(self, name: str) -> None:
        with about_job(name):
            await self._reconcile(name)

    async def _reconcile(self, name: str) -> None:
        # Within its lock's life: a reconcile still running when another replica may take the job stops.
        async with asyncio.timeout(LOCK_MS / 1000 - 1):
            await self._reconcile_locked(name)

    async def _reconcile_locked(self, name: str) -> None:
        held = await self.parts.locks.acquire(name, LOCK_WAIT)
        if held is None:
            raise Retry(f"job {name} is being handled by another replica", 0.2)
        try:
            if held.peeked not in ("", STALE):
                return  # ended, its ending carried out, and nothing that may concern it happened since
            for _ in range(8):
                if await self._reconcile_once(name, held.peeked):
                    return
            raise Retry(f"job {name}: the status kept changing under us", 0.5)
        finally:
            await self.parts.locks.release(name)

    async def _reconcile_once(self, name: str, mark: str) -> bool:
        """Read the job, let the machine decide, carry out what that takes (`deeds.plan`). False: the job
        changed meanwhile, or it has just started waiting for a replacement: look again. `mark`: its ended
        mark as its lock was taken."""
        raw = await self.parts.observer.get(paths.job(name))
        if raw is None:
            return True
        job, invalid = read_pmj(raw)
        if invalid is not None:
            return await self.parts.endings.end_invalid(raw, job, invalid)
        version = latest = str(raw["metadata"].get("resourceVersion") or "")
        observed = await self.parts.observer.observe(job)
        step = machine.progress(observed)
        todo = deeds.plan(job, observed, step)

        async def settles(written: PodMigrationJob | None) -> None:
            """An own write whose event brings nothing to decide, remembered at once: the watcher's event
            of it often comes back before this reconcile ends. Should this replica die before its commands,
            the message that started the reconcile is redelivered and the step decided, and acted, again."""
            if written is not None and machine.settled(observed, step, written):
                await self.parts.state.settled(name, [written.metadata.resource_version or ""])

        if todo.write:
            body = {**raw, "status": msgspec.to_builtins(step.status)}
            try:
                answer = await self.kube.arequest("PUT", paths.job_status(name), body=body)
            except KubeError as exc:
                if exc.status == 409:
                    return False  # changed meanwhile: read it again and decide again
                if exc.status == 404:
                    return True
                raise
            written = codec.decode(answer, PodMigrationJob)
            latest = written.metadata.resource_version or ""
            await settles(written)
            await self.transitioned(job, job.status.phase if job.status else None, step)
        elif todo.retell:
            # Written, but its audit record was never acknowledged (NATS lost it, or this replica died in
            # between): told now, under the same id (a repeat is dropped by the stream).
            audited = cast(Phase, observed.audited) if observed.audited else None
            await self.transitioned(job, audited, machine.Step(step.status))
        if todo.record_ledger:
            # What it holds in the ledger, and a strategy the arbitrator chose, written on the PMJ.
            await settles(await self.parts.endings.record_ledger(job, surge=observed.surge))
        for deed in todo.deeds:
            await self._carry_out(job, deed)
        if todo.point_at is not None:
            # After the commands: the migration goes on.
            await settles(await self.parts.effects.point_at(job, todo.point_at))
        return await self._keep(job, todo, read=version, left_at=latest, mark=mark)

    async def _carry_out(self, job: PodMigrationJob, deed: deeds.Deed) -> None:
        name = job.metadata.name or ""
        match deed:
            case deeds.InFlight(workload):
                await self.parts.state.in_flight(name, workload)
            case deeds.Asked(attempt):
                await self.parts.state.asked(job, attempt)  # before the command: its name is read from now on
            case deeds.Command(step, pod_uid, attempt, target):
                more = {"attempt": attempt} if attempt is not None else {"target": target}
                await self.parts.effects.command(job, step, pod_uid, **more)
            case deeds.Cleanup(workload, reservation, attempts):
                await self.parts.endings.cleanup(job, workload, reservation, attempts=attempts)
            case deeds.Release(phase, cleanup_if_in_flight):
                if cleanup_if_in_flight and await self.parts.state.was_in_flight(name):
                    await self.parts.endings.cleanup(job, None)
                await self.parts.endings.release(job, phase)

    async def _keep(
        self, job: PodMigrationJob, todo: deeds.Plan, *, read: str, left_at: str, mark: str
    ) -> bool:
        """What the tracker keeps of the job, in one round trip: the version `read` decided on; an ended
        job's ending carried out at the version it was `left_at` (unless its `mark` changed meanwhile). False
        when it has just been registered as waiting for a replacement: one that bound in between kicked no
        one, so look once more (every later bind kicks this job)."""
        name = job.metadata.name or ""
        pipe = self.client.pipeline(transaction=False)
        if read:
            self.parts.state.decided(name, read, pipe)
        if todo.look_again_at is None:
            await self.parts.state.untrack(job, pipe)
            if left_at:
                await self.parts.state.ended(name, left_at, read=mark, pipe=pipe)
        else:
            if todo.atomic_drain is not None:  # its drain (or plan) waits for every pod's room
                plan = todo.atomic_drain.removeprefix(deeds.ATOMIC_PLAN_PREFIX)
                if plan != todo.atomic_drain:
                    pipe.sadd(self.keys.atomic_plans, plan)
                else:
                    pipe.sadd(self.keys.atomic_drains, todo.atomic_drain)
            self.parts.state.tracking(job, pipe, at=todo.look_again_at)
        if todo.waits_no_more_in:
            pipe.srem(self.keys.waiting(todo.waits_no_more_in), name)
        if len(pipe):
            await pipe.execute()
        return not (todo.waits_in and await self.client.sadd(self.keys.waiting(todo.waits_in), name))

    async def transitioned(self, job: PodMigrationJob, previous: Phase | None, step: machine.Step) -> None:
        await self.parts.effects.transitioned(job, previous, step)
        await self.parts.state.phase_written(job.metadata.name or "", step.status.phase or PHASE_PENDING)
