"""How a job's holdings end: its Reservations cleaned up (room a sibling may still use kept until the
workload's last job ends), its ledger slots released exactly once with the statistics they feed, what it
holds recorded on the PMJ while it runs, and everything forgotten when the PMJ is deleted. A job that
cannot run (`shared.api.pmj_read`) ends here too, once.
"""

from __future__ import annotations

import logging
from typing import Any

import msgspec
import redis.asyncio as aioredis

from services.tracker.jobs.effects import Effects
from services.tracker.jobs.invalid import end_invalid
from services.tracker.jobs.machine import ReservationView
from services.tracker.jobs.state import JobState
from services.tracker.keys import TrackerKeys
from shared.api import paths
from shared.api.names import ANNOTATION_LEDGER, ANNOTATION_STRATEGY
from shared.api.pmj import PHASE_FAILED, PHASE_SUCCEEDED, PodMigrationJob
from shared.api.surge import STRATEGY_SURGE
from shared.api.validation import Invalid
from shared.kube.client import KubeError
from shared.ledger import store as ledger
from shared.ledger.scripts import as_text, lua_script
from shared.ledger.stats import MigrationStats
from shared.ledger.store import Ledger
from shared.redis.durable import Durability

log = logging.getLogger("services.tracker")


class Endings:
    def __init__(
        self,
        client: aioredis.Redis,
        keys: TrackerKeys,
        ledger: Ledger,
        *,
        stats: MigrationStats,
        effects: Effects,
        state: JobState,
        durability: Durability,
    ) -> None:
        self.client, self.keys, self.ledger, self.stats = client, keys, ledger, stats
        self.effects, self.state, self.durability = effects, state, durability
        self._room_ends = client.register_script(lua_script("room.lua", home="services.tracker.jobs"))

    async def end_invalid(self, raw: dict[str, Any], job: PodMigrationJob, invalid: Invalid) -> bool:
        """A job that cannot run ends Failed: one write, one log line, never a retry. False: the job
        changed meanwhile, to be read again."""
        name = job.metadata.name or ""
        step = end_invalid(job, invalid)
        if step.status != job.status:
            body = {**raw, "status": msgspec.to_builtins(step.status)}
            try:
                await self.effects.kube.arequest("PUT", paths.job_status(name), body=body)
            except KubeError as exc:
                if exc.status in (404, 409):
                    return exc.status == 404
                raise
            log.warning("job %s cannot run: %s", name, invalid.message, extra={"job": name})
            await self.effects.transitioned(job, job.status.phase if job.status else None, step)
            await self.state.phase_written(name, PHASE_FAILED)
            await self.release(job, PHASE_FAILED)
        await self.state.untrack(job)
        return True

    async def forget(self, job: PodMigrationJob) -> None:
        """The PMJ was deleted: whatever it held goes (its Reservation, its ledger slots)."""
        uid = job.metadata.uid or ""
        await self.cleanup(job, None)
        await self.client.hdel(self.keys.workload_uid_of, job.metadata.name or "")
        if await self.ledger.release(uid):
            await self.effects.released(uid)
        await self.state.untrack(job)
        pipe = self.client.pipeline(transaction=False)  # what the tracker kept for it, to the last field
        pipe.hdel(self.keys.phases, job.metadata.name or "")
        pipe.hdel(self.keys.ended, job.metadata.name or "")
        pipe.delete(self.keys.written(job.metadata.name or ""))
        kept = (
            self.keys.decisions,
            self.keys.windows,
            self.keys.deferrals,
            self.keys.pod_uids,
            self.keys.pods_gone,
            self.keys.replacement,
        )
        for per_job in (*kept, self.keys.attempts):
            pipe.hdel(per_job, uid)
        pipe.delete(self.keys.reports(uid))
        await pipe.execute()

    async def cleanup(
        self,
        job: PodMigrationJob,
        workload: str | None,
        room: ReservationView | None = None,
        *,
        attempts: int = 0,
    ) -> None:
        """Ask the executor to delete the job's Reservations. A replacement of the workload may take any
        job's room, so room a job did not use is kept while a sibling is in flight; the last job of the
        workload to end takes the kept room with it (room.lua). Kept room that a replacement takes later
        is asked for again (the command names the room's state, so it is not a duplicate of the first)."""
        name = job.metadata.name or ""
        more: dict[str, Any] = {"attempts": attempts} if attempts else {}  # the executor reads them by name
        seen = f"{room.name}:{room.phase}:{len(room.bound)}" if room is not None else ""
        workload = workload or as_text(await self.client.hget(self.keys.workload_uid_of, name) or b"")
        if workload:
            keys = [self.keys.in_flight(workload), self.keys.room_kept(workload)]
            answer = await self._room_ends(keys=keys, args=[name])
            code, kept = int(answer[0]), [as_text(v) for v in answer[1:]]
            if code == 0:
                more["keep_untaken"] = True
            elif code == 1 and kept:
                more["also"] = sorted(kept)
        await self.effects.command(job, "cleanup", None, seen=seen, **more)

    async def release(self, job: PodMigrationJob, phase: str) -> None:
        uid = job.metadata.uid or ""
        released = await self.ledger.release(uid)
        # Held by replicas before anyone hears of it (again on every look at the ended job: a release that a
        # failover lost is made again, not left to the slot's expiry).
        await self.durability.confirm()
        if not released:
            return
        ref = job.spec.pod_ref
        if phase == PHASE_FAILED and ref is not None:
            await self.stats.pod_failed(ref.namespace or "", ref.name or "")
        # The workload whose slot the job held, as its PMJ recorded it when it started running.
        held = ledger.recorded(uid, job.metadata.annotations or {})
        if phase == PHASE_SUCCEEDED and held is not None and held.workload is not None:
            await self.stats.workload_migrated(held.workload)
        # Last: whoever hears of the release (the arbitrator's next pass) reads the statistics it updated.
        await self.effects.released(uid)

    async def record_ledger(self, job: PodMigrationJob, *, surge: bool = False) -> PodMigrationJob | None:
        """What the job holds in the ledger, on the PMJ: the ledger is rebuilt from it after a Redis loss;
        and, `surge`, that it moves by Surge (the arbitrator's choice outlives its decision). Returns the job
        as written, if it was."""
        held = await self.ledger.held(job.metadata.uid or "")
        annotations = {ANNOTATION_LEDGER: held.annotation()} if held is not None else {}
        if surge:
            annotations[ANNOTATION_STRATEGY] = STRATEGY_SURGE
        if not annotations:
            return None
        return await self.effects.patch_job(job, {"metadata": {"annotations": annotations}})
