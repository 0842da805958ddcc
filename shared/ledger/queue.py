"""The ledger's pending jobs: the ready queue (one sorted set read in lexicographic order, see
arbitrator.rules.order.lex_key) and the jobs parked on the gate that deferred them (lua/parking.lua)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec
import redis.asyncio as aioredis
from redis.asyncio.client import Pipeline

from shared.ledger.keys import LedgerKeys
from shared.ledger.scripts import as_text, lua_script


class Announcement(msgspec.Struct, frozen=True):
    """An outcome taken off the queue whose decision may not have been published yet."""

    outcome: str
    rule: str
    message: str
    pod_uid: str
    reason: str
    at: float  # when it was taken off the queue (the ledger's clock)


class PendingJobs:
    def __init__(self, client: aioredis.Redis, keys: LedgerKeys) -> None:
        self.client, self.keys = client, keys
        self._queue = client.register_script(lua_script("queue.lua", "parking.lua"))

    async def _op(self, *args: Any, client: Pipeline | None = None) -> Any:
        return await self._queue(keys=[self.keys.prefix], args=list(args), client=client)

    async def enqueue(self, job_uid: str, sort_key: str) -> None:
        """Queue (or re-rank) a job at `sort_key`; a parked job returns to the ready queue."""
        await self._op("enqueue", job_uid, f"{sort_key}|{job_uid}")

    async def enqueue_many(self, jobs: Iterable[tuple[str, str]], pipe: Pipeline | None = None) -> None:
        """`enqueue` for many (job uid, sort key) pairs in one round trip; with `pipe`, only added to that
        pipeline (the caller executes it)."""
        if pipe is None:  # its own, handed back even when cancelled while its script is looked up
            async with self.client.pipeline(transaction=False) as own:
                await self.enqueue_many(jobs, own)
                await own.execute()
            return
        for job_uid, key in jobs:
            await self._op("enqueue", job_uid, f"{key}|{job_uid}", client=pipe)

    async def dequeue(self, *job_uids: str) -> int:
        """These jobs are no longer pending (gone, aborted, paused), in one step; how many of them were."""
        if not job_uids:
            return 0
        return int(await self._op("dequeue", *job_uids))

    async def tick(self, now: float | None = None, *, rewind: bool = False) -> float | None:
        """Fire due timers (tokens due, facts awaited, windows opened); return the seconds until the next one.
        `rewind`: every timer is due now (what the jobs wait for may have changed)."""
        if rewind:
            timers = self.keys.key("timers")
            await self.client.zunionstore(timers, {timers: 0})
        _fired, wait = await self._op("tick", "" if now is None else now, 1024)
        seconds = float(as_text(wait))
        return None if seconds < 0 else seconds

    async def wake(self, gates: Sequence[str]) -> int:
        """The facts behind these gates' limits changed (e.g. "slot:pdb:ns/name"): look at their waiters."""
        if not gates:
            return 0
        return int(await self._op("wake", *gates))

    async def wake_slots(self, slot_keys: Sequence[str]) -> int:
        """The limits of these slots (shared.ledger.slots keys) may have grown: look at their waiters."""
        return await self.wake([f"slot:{key}" for key in slot_keys])

    async def sweep(self, cursor: int, count: int) -> int:
        """Wake the best waiter of up to `count` gates; returns the cursor to continue from (0: wrapped)."""
        return int(as_text(await self._op("sweep", cursor, count)))

    async def head(self, count: int, start: int = 0) -> list[str]:
        """The job uids at the head of the ready queue, best first (from its `start`th)."""
        members: list[Any] = await self.client.zrange(self.keys.key("queue"), start, start + count - 1)
        return [as_text(m).rsplit("|", 1)[1] for m in members]

    async def parked(self) -> dict[str, str]:
        """Parked jobs and the gate each waits on."""
        raw = await self.client.hgetall(self.keys.key("parked"))
        return {as_text(k): as_text(v) for k, v in raw.items()}

    async def length(self) -> int:
        """Pending jobs: ready or parked."""
        return int(await self.client.hlen(self.keys.key("queued")))

    async def unannounced(self, older_than: float = 0.0) -> dict[str, Announcement]:
        """Outcomes taken off the queue at least `older_than` seconds ago whose decisions may not have been
        published yet, by job (younger ones are most likely being published by the replica that took them)."""
        raw = await self.client.hgetall(self.keys.key("announce"))
        if not raw:
            return {}
        seconds, micros = await self.client.time()
        now = seconds + micros / 1e6
        found = {as_text(job): Announcement(*json.loads(value)) for job, value in raw.items()}
        return {job: a for job, a in found.items() if now - a.at >= older_than}

    def announced(self, pipe: Pipeline, job_uids: Sequence[str]) -> None:
        """Add to `pipe`: the outcomes of `job_uids` have been published."""
        pipe.hdel(self.keys.key("announce"), *job_uids)
