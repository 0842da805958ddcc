"""Whether the ledger is complete, and rebuilding it from the jobs that are running.

The `marker` key says the ledger is complete; when Redis restarts or is flushed it is missing, and admission
refuses everything ("closed") until `rebuild` has restored the running jobs, read from their
PodMigrationJobs."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from typing import Any

import msgspec
import redis.asyncio as aioredis

from shared.ledger.keys import LedgerKeys
from shared.ledger.scripts import as_text, lua_script
from shared.ledger.slots import workload_of


class HeldJob(msgspec.Struct, frozen=True):
    job_uid: str
    pod_uid: str
    slot_keys: tuple[str, ...]

    @property
    def workload(self) -> str | None:
        """The workload (`Kind/namespace/name`) whose slot the job holds, if any."""
        return next((w for key in self.slot_keys if (w := workload_of(key)) is not None), None)

    def annotation(self) -> str:
        return json.dumps({"pod": self.pod_uid, "slots": list(self.slot_keys)})


class Completeness:
    def __init__(self, client: aioredis.Redis, keys: LedgerKeys, slot_ttl: float) -> None:
        self.client, self.keys, self.slot_ttl = client, keys, slot_ttl
        self._track_gone = client.register_script(lua_script("track_gone.lua", "parking.lua"))

    async def is_complete(self) -> bool:
        return bool(await self.client.exists(self.keys.key("marker")))

    async def generation(self) -> str | None:
        """The complete ledger's generation (a new one after every rebuild), or None while it is not."""
        value = await self.client.get(self.keys.key("marker"))
        return as_text(value) if value is not None else None

    async def rebuild(self, running: Iterable[HeldJob]) -> int:
        """Restore the slots and claims of `running` jobs (from their PMJs), then mark the ledger complete."""
        keys = self.keys
        pipe = self.client.pipeline(transaction=True)
        jobs = list(running)
        for job in jobs:
            for key in job.slot_keys:
                pipe.sadd(keys.member("slots", key), job.job_uid)
            pipe.hset(keys.key("claims"), job.pod_uid, job.job_uid)
            pipe.hset(
                keys.member("job", job.job_uid),
                mapping={"pod": job.pod_uid, "slots": json.dumps(list(job.slot_keys)), "admitted": "rebuilt"},
            )
            pipe.zadd(keys.key("expiry"), {job.job_uid: 0}, nx=True)
        await pipe.execute()
        # Which of them stand for a replica that is not Ready (the Ready sets were refilled before this).
        held = [
            [j.job_uid, j.pod_uid, key] for j in jobs for key in j.slot_keys if workload_of(key) is not None
        ]
        if held:
            await self._track_gone(keys=[keys.prefix], args=[json.dumps(held)])
        # A new generation: decisions made again after Redis lost the ledger are new messages, not
        # duplicates JetStream would drop (the same job admitted again must reach the tracker again).
        await self.client.set(keys.key("marker"), uuid.uuid4().hex[:12])
        # Rebuilt jobs expire a full TTL from now, by the ledger's clock.
        seconds, micros = await self.client.time()
        now = seconds + micros / 1e6
        found: list[Any] = await self.client.zrangebyscore(keys.key("expiry"), 0, 0)
        members = [as_text(m) for m in found]
        if members:
            await self.client.zadd(keys.key("expiry"), dict.fromkeys(members, now + self.slot_ttl))
        return len(jobs)
