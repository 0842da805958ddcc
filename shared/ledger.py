"""The admission ledger in Redis: slots, token buckets and pod claims, changed only by atomic scripts.

Every key lives under one hash tag (`{<keyPrefix>}:ledger:...`), so each script touches one Redis Cluster
slot. Slots are sets of job UIDs: a retried admission cannot take a slot twice, and a release removes
exactly what the job took (recorded with the job at admission). A slot whose job vanished without a
release expires after `arbitrator.slotTTL`. The `marker` key says the ledger is complete; when Redis
restarts or is flushed it is missing, and `admit` refuses everything ("closed") until `rebuild` has
restored the jobs that are running, read from their PodMigrationJobs.

The scripts implement `services.arbitrator.rules.limits.evaluate`; the tests hold them to it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

import redis.asyncio as aioredis

from shared.slots import Bucket, Slot

ADMITTED = "admitted"
DEFERRED = "deferred"
FORBIDDEN = "forbidden"
CLOSED = "closed"


def as_text(value: bytes | str) -> str:
    """A Redis reply as text (clients may be set to return bytes or str)."""
    return value.decode() if isinstance(value, bytes) else value


def lua_script(name: str) -> str:
    """One of Podherd's Redis scripts (shared/lua/<name>)."""
    return resources.files("shared").joinpath("lua", name).read_text()


@dataclass(frozen=True)
class Verdict:
    outcome: str  # admitted | deferred | forbidden | closed
    rule: str
    message: str

    @property
    def admitted(self) -> bool:
        return self.outcome == ADMITTED


@dataclass(frozen=True)
class Candidate:
    job_uid: str
    pod_uid: str
    slots: tuple[Slot, ...]
    buckets: tuple[Bucket, ...]


@dataclass(frozen=True)
class HeldJob:
    job_uid: str
    pod_uid: str
    slot_keys: tuple[str, ...]


class Ledger:
    def __init__(self, client: aioredis.Redis, key_prefix: str, slot_ttl: float) -> None:
        self.client = client
        self.prefix = "{" + key_prefix + "}:ledger"
        self.slot_ttl = slot_ttl
        self._admit = client.register_script(lua_script("admit.lua"))
        self._release = client.register_script(lua_script("release.lua"))
        self._evicting = client.register_script(lua_script("evicting.lua"))

    # ----------------------------------------------------------------------------------------------------

    async def admit(
        self,
        job_uid: str,
        pod_uid: str,
        slots: Sequence[Slot],
        buckets: Sequence[Bucket],
        now: float | None = None,
    ) -> Verdict:
        """Admit one job (not through the queue)."""
        verdicts = await self.admit_batch(
            [Candidate(job_uid, pod_uid, tuple(slots), tuple(buckets))], False, now
        )
        assert verdicts is not None
        return verdicts[0]

    async def admit_batch(
        self, candidates: Sequence[Candidate], from_queue: bool, now: float | None = None
    ) -> list[Verdict] | None:
        """Admit `candidates` in order, each all or nothing, in one atomic step.

        With `from_queue`, the candidates must be the pending queue's head, in order; if another replica
        changed the head meanwhile, nothing is done and None is returned (read the head again and retry).
        Admitted and forbidden jobs leave the queue; deferred ones stay.
        """
        args: list[Any] = [
            self.slot_ttl,
            "" if now is None else repr(now),
            "1" if from_queue else "0",
            len(candidates),
        ]
        for c in candidates:
            plan = json.dumps(
                {
                    "slots": [[s.rule, s.key, s.limit, s.what] for s in c.slots],
                    "buckets": [[b.rule, b.key, b.rate, b.burst, b.what] for b in c.buckets],
                }
            )
            args.extend([c.job_uid, c.pod_uid, plan])
        reply = [as_text(part) for part in await self._admit(keys=[self.prefix], args=args)]
        if reply == ["retry"]:
            return None
        return [Verdict(reply[i], reply[i + 1], reply[i + 2]) for i in range(0, len(reply), 3)]

    # ----------------------------------------------------------------------------------------------------
    # The pending queue: one sorted set, read in lexicographic order (see arbitrator.rules.order.lex_key)

    async def enqueue(self, job_uid: str, sort_key: str) -> None:
        """Queue (or re-rank) a job; its place is `sort_key`."""
        member = f"{sort_key}|{job_uid}"
        old = await self.client.hget(f"{self.prefix}:queued", job_uid)
        pipe = self.client.pipeline(transaction=True)
        if old is not None and as_text(old) != member:
            pipe.zrem(f"{self.prefix}:queue", as_text(old))
        pipe.zadd(f"{self.prefix}:queue", {member: 0})
        pipe.hset(f"{self.prefix}:queued", job_uid, member)
        await pipe.execute()

    async def dequeue(self, job_uid: str) -> bool:
        old = await self.client.hget(f"{self.prefix}:queued", job_uid)
        if old is None:
            return False
        pipe = self.client.pipeline(transaction=True)
        pipe.zrem(f"{self.prefix}:queue", as_text(old))
        pipe.hdel(f"{self.prefix}:queued", job_uid)
        await pipe.execute()
        return True

    async def head(self, count: int) -> list[str]:
        """The job uids at the head of the queue, best first."""
        members: list[Any] = await self.client.zrange(f"{self.prefix}:queue", 0, count - 1)
        return [as_text(m).rsplit("|", 1)[1] for m in members]

    async def unannounced(self) -> dict[str, tuple[str, str, str]]:
        """Outcomes taken off the queue whose decisions may not have been published yet: job -> (outcome,
        rule, message)."""
        raw = await self.client.hgetall(f"{self.prefix}:announce")
        out = {}
        for job, value in raw.items():
            outcome, rule, message, _pod = json.loads(value)
            out[as_text(job)] = (outcome, rule, message)
        return out

    async def forget(self, job_uid: str) -> None:
        """The job's PMJ is gone: stop remembering that it was admitted once."""
        await self.client.srem(f"{self.prefix}:done", job_uid)

    async def held_slots(self, job_uid: str) -> list[str]:
        record = await self.client.hget(f"{self.prefix}:job:{job_uid}", "slots")
        return list(json.loads(record)) if record else []

    async def announced(self, job_uid: str) -> None:
        await self.client.hdel(f"{self.prefix}:announce", job_uid)

    async def queue_length(self) -> int:
        return int(await self.client.zcard(f"{self.prefix}:queue"))

    async def release(self, job_uid: str) -> bool:
        """Free what `job_uid` holds. True only the first time (so callers can count releases exactly)."""
        return bool(await self._release(keys=[self.prefix], args=[job_uid]))

    async def set_evicting(self, pod_uid: str, in_progress: bool, slot_keys: Iterable[str]) -> int:
        return int(
            await self._evicting(
                keys=[self.prefix], args=[pod_uid, "1" if in_progress else "0", json.dumps(list(slot_keys))]
            )
        )

    # ----------------------------------------------------------------------------------------------------
    # Completeness: the marker, and rebuilding from the jobs that are running

    async def is_complete(self) -> bool:
        return bool(await self.client.exists(f"{self.prefix}:marker"))

    async def rebuild(self, running: Iterable[HeldJob]) -> int:
        """Restore the slots and claims of `running` jobs (from their PMJs), then mark the ledger complete."""
        pipe = self.client.pipeline(transaction=True)
        count = 0
        for job in running:
            for key in job.slot_keys:
                pipe.sadd(f"{self.prefix}:slots:{key}", job.job_uid)
            pipe.hset(f"{self.prefix}:claims", job.pod_uid, job.job_uid)
            pipe.hset(
                f"{self.prefix}:job:{job.job_uid}",
                mapping={"pod": job.pod_uid, "slots": json.dumps(list(job.slot_keys)), "admitted": "rebuilt"},
            )
            pipe.zadd(f"{self.prefix}:expiry", {job.job_uid: 0}, nx=True)
            count += 1
        pipe.set(f"{self.prefix}:marker", "complete")
        await pipe.execute()
        # Rebuilt jobs expire a full TTL from now, by the ledger's clock.
        seconds, micros = await self.client.time()
        now = seconds + micros / 1e6
        found: list[Any] = await self.client.zrangebyscore(f"{self.prefix}:expiry", 0, 0)
        members = [as_text(m) for m in found]
        if members:
            await self.client.zadd(f"{self.prefix}:expiry", dict.fromkeys(members, now + self.slot_ttl))
        return count

    async def snapshot(self) -> dict[str, Any]:
        """Slots and claims as plain data (for checks, metrics and tests)."""
        slots: dict[str, list[str]] = {}
        async for key in self.client.scan_iter(match=f"{self.prefix}:slots:*", count=1000):
            name = as_text(key)[len(self.prefix) + len(":slots:") :]
            slots[name] = sorted(as_text(m) for m in await self.client.smembers(key))
        raw_claims = await self.client.hgetall(f"{self.prefix}:claims")
        claims = {as_text(k): as_text(v) for k, v in raw_claims.items()}
        return {"slots": {k: v for k, v in slots.items() if v}, "claims": claims}
