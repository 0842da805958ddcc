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
import uuid
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from typing import Any

import msgspec
import redis.asyncio as aioredis
from redis.asyncio.client import Pipeline

from shared.api.names import ANNOTATION_LEDGER
from shared.slots import Bucket, Slot, workload_of

ADMITTED = "admitted"
DEFERRED = "deferred"
FORBIDDEN = "forbidden"
REJECTED = "rejected"
CLOSED = "closed"


def as_text(value: bytes | str) -> str:
    """A Redis reply as text (clients may be set to return bytes or str)."""
    return value.decode() if isinstance(value, bytes) else value


def lua_script(name: str, *prelude: str, home: str = "shared") -> str:
    """One of Podherd's Redis scripts (`<home>/lua/<name>`: a service keeps its own beside it), after the
    shared functions it uses (`shared/lua/`)."""
    shared = resources.files("shared").joinpath("lua")
    own = resources.files(home).joinpath("lua").joinpath(name).read_text()
    return "\n".join([*(shared.joinpath(p).read_text() for p in prelude), own])


# What the ledger counts of pods (background evictions, each workload's Ready pods), kept by two scripts
# that those applying many pod events at once run in their own pipelines, with these arguments.
EVICTING_SCRIPT = ("evicting.lua", "gates.lua")
POD_READY_SCRIPT = ("pod_ready.lua", "gates.lua", "versions.lua")


def evicting_args(pod_uid: str, in_progress: bool, slot_keys: Iterable[str]) -> list[str]:
    """evicting.lua's arguments: the pod counts as evicted in the background in these slots, or not."""
    return [pod_uid, "1" if in_progress else "0", json.dumps(list(slot_keys))]


def ready_args(
    ident: str, resource_version: str, uid: str, *, ready: bool, workload_key: str, deleted: bool
) -> list[str]:
    """pod_ready.lua's arguments for one pod event."""
    flags = ("1" if ready and not deleted else "0", workload_key, "1" if deleted else "0")
    return [ident, resource_version, uid, *flags]


class Verdict(msgspec.Struct, frozen=True):
    outcome: str  # admitted | deferred | forbidden | closed
    rule: str
    message: str
    # What a deferred job waits on: "slot:<key>", "bucket:<key>" or "timer" (its facts); "" otherwise.
    gate: str = ""

    @property
    def holder(self) -> str:
        """The rule and the object holding a deferred job: it is audited again only when this changes."""
        return f"{self.rule}|{self.gate}"

    @property
    def admitted(self) -> bool:
        return self.outcome == ADMITTED


class Candidate(msgspec.Struct, frozen=True):
    """A queued job as the ledger sees it: what admitting it takes, or why it cannot be admitted now."""

    job_uid: str
    pod_uid: str
    slots: tuple[Slot, ...]
    buckets: tuple[Bucket, ...]
    reject: tuple[str, str, str] | None = None  # (rule, reason, message): a filter forbids it
    wait: tuple[float, str, str] | None = None  # (seconds, rule, message): its facts are not known yet
    drop: bool = False  # its job is gone
    surge: bool = False  # admitted, it moves by Surge (the decision says so)


class Announcement(msgspec.Struct, frozen=True):
    """An outcome taken off the queue whose decision may not have been published yet."""

    outcome: str
    rule: str
    message: str
    pod_uid: str
    reason: str
    at: float  # when it was taken off the queue (the ledger's clock)


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


def recorded(job_uid: str, annotations: Mapping[str, str]) -> HeldJob | None:
    """What a PMJ's annotation says its job holds; None without one, or with one no Podherd wrote."""
    try:
        data = json.loads(annotations[ANNOTATION_LEDGER])
        return HeldJob(job_uid, str(data["pod"]), tuple(str(key) for key in data["slots"]))
    except (KeyError, TypeError, ValueError):
        return None


def ledger_prefix(key_prefix: str) -> str:
    """Every ledger key starts with this; the hash tag keeps them in one Redis Cluster slot."""
    return "{" + key_prefix + "}:ledger"


class Ledger:
    def __init__(self, client: aioredis.Redis, key_prefix: str, slot_ttl: float) -> None:
        self.client = client
        self.prefix = ledger_prefix(key_prefix)
        self.slot_ttl = slot_ttl
        self._admit = client.register_script(lua_script("admit.lua", "gates.lua"))
        self._release = client.register_script(lua_script("release.lua", "gates.lua"))
        self._evicting = client.register_script(lua_script(*EVICTING_SCRIPT))
        self._queue = client.register_script(lua_script("queue.lua", "gates.lua"))
        self._pod_ready = client.register_script(lua_script(*POD_READY_SCRIPT))
        self._track_gone = client.register_script(lua_script("track_gone.lua", "gates.lua"))

    # ----------------------------------------------------------------------------------------------------

    # The ledger's keys, for those who read it (the arbitrator's engine, the watchdog): spelled here only.
    def slot_set(self, slot_key: str) -> str:
        """The set of jobs (and pods evicting in the background) holding slot `slot_key`."""
        return f"{self.prefix}:slots:{slot_key}"

    @property
    def queued(self) -> str:
        """The hash of queued jobs (job uid -> its plan)."""
        return f"{self.prefix}:queued"

    @property
    def rebuild_lock(self) -> str:
        return f"{self.prefix}:rebuilding"

    async def admit(
        self,
        job_uid: str,
        pod_uid: str,
        slots: Sequence[Slot],
        *,
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
            _round(candidates),
        ]
        reply = [as_text(part) for part in await self._admit(keys=[self.prefix], args=args)]
        if reply == ["retry"]:
            return None
        return [Verdict(*reply[i : i + 4]) for i in range(0, len(reply), 4)]

    # ----------------------------------------------------------------------------------------------------
    # Pending jobs: the ready queue (one sorted set, read in lexicographic order, see
    # arbitrator.rules.order.lex_key) and the jobs parked on the gate that deferred them (lua/gates.lua).

    async def enqueue(self, job_uid: str, sort_key: str) -> None:
        """Queue (or re-rank) a job at `sort_key`; a parked job returns to the ready queue."""
        await self._queue(keys=[self.prefix], args=["enqueue", job_uid, f"{sort_key}|{job_uid}"])

    async def enqueue_many(self, jobs: Iterable[tuple[str, str]], pipe: Pipeline | None = None) -> None:
        """`enqueue` for many (job uid, sort key) pairs in one round trip; with `pipe`, only added to that
        pipeline (the caller executes it)."""
        if pipe is None:  # its own, handed back even when cancelled while its script is looked up
            async with self.client.pipeline(transaction=False) as own:
                await self.enqueue_many(jobs, own)
                await own.execute()
            return
        for job_uid, key in jobs:
            await self._queue(keys=[self.prefix], args=["enqueue", job_uid, f"{key}|{job_uid}"], client=pipe)

    async def dequeue(self, *job_uids: str) -> int:
        """These jobs are no longer pending (gone, aborted, paused), in one step; how many of them were."""
        if not job_uids:
            return 0
        return int(await self._queue(keys=[self.prefix], args=["dequeue", *job_uids]))

    async def tick(self, now: float | None = None, *, rewind: bool = False) -> float | None:
        """Fire due timers (tokens due, facts awaited, windows opened); return the seconds until the next one.
        `rewind`: every timer is due now (what the jobs wait for may have changed)."""
        if rewind:
            await self.client.zunionstore(f"{self.prefix}:timers", {f"{self.prefix}:timers": 0})
        _fired, wait = await self._queue(keys=[self.prefix], args=["tick", "" if now is None else now, 1024])
        seconds = float(as_text(wait))
        return None if seconds < 0 else seconds

    async def wake(self, gates: Sequence[str]) -> int:
        """The facts behind these gates' limits changed (e.g. "slot:pdb:ns/name"): look at their waiters."""
        if not gates:
            return 0
        return int(await self._queue(keys=[self.prefix], args=["wake", *gates]))

    async def wake_slots(self, slot_keys: Sequence[str]) -> int:
        """The limits of these slots (shared.slots keys) may have grown: look at their waiters."""
        return await self.wake([f"slot:{key}" for key in slot_keys])

    async def sweep(self, cursor: int, count: int) -> int:
        """Wake the best waiter of up to `count` gates; returns the cursor to continue from (0: wrapped)."""
        return int(as_text(await self._queue(keys=[self.prefix], args=["sweep", cursor, count])))

    async def head(self, count: int, start: int = 0) -> list[str]:
        """The job uids at the head of the ready queue, best first (from its `start`th)."""
        members: list[Any] = await self.client.zrange(f"{self.prefix}:queue", start, start + count - 1)
        return [as_text(m).rsplit("|", 1)[1] for m in members]

    async def parked(self) -> dict[str, str]:
        """Parked jobs and the gate each waits on."""
        raw = await self.client.hgetall(f"{self.prefix}:parked")
        return {as_text(k): as_text(v) for k, v in raw.items()}

    async def unannounced(self, older_than: float = 0.0) -> dict[str, Announcement]:
        """Outcomes taken off the queue at least `older_than` seconds ago whose decisions may not have been
        published yet, by job (younger ones are most likely being published by the replica that took them)."""
        raw = await self.client.hgetall(f"{self.prefix}:announce")
        if not raw:
            return {}
        seconds, micros = await self.client.time()
        now = seconds + micros / 1e6
        found = {as_text(job): Announcement(*json.loads(value)) for job, value in raw.items()}
        return {job: a for job, a in found.items() if now - a.at >= older_than}

    async def forget(self, *job_uids: str) -> None:
        """The jobs' PMJs are gone: stop remembering that they were admitted once."""
        if job_uids:
            await self.client.srem(f"{self.prefix}:done", *job_uids)

    async def held(self, job_uid: str) -> HeldJob | None:
        """What the job holds now (None: nothing, released or never admitted)."""
        pod, slots = await self.client.hmget(f"{self.prefix}:job:{job_uid}", ["pod", "slots"])
        if pod is None or slots is None:
            return None
        return HeldJob(job_uid, as_text(pod), tuple(json.loads(slots)))

    async def held_slots(self, job_uid: str) -> tuple[list[str], bool]:
        """The slot keys an admitted job holds, and whether it was admitted to move by Surge."""
        record, surge = await self.client.hmget(f"{self.prefix}:job:{job_uid}", ["slots", "surge"])
        return (list(json.loads(record)) if record else []), surge is not None

    def announced(self, pipe: Pipeline, job_uids: Sequence[str]) -> None:
        """Add to `pipe`: the outcomes of `job_uids` have been published."""
        pipe.hdel(f"{self.prefix}:announce", *job_uids)

    async def queue_length(self) -> int:
        """Pending jobs: ready or parked."""
        return int(await self.client.hlen(self.queued))

    async def release(self, job_uid: str) -> bool:
        """Free what `job_uid` holds. True only the first time (so callers can count releases exactly)."""
        return bool(await self._release(keys=[self.prefix], args=[job_uid]))

    async def set_evicting(self, pod_uid: str, in_progress: bool, slot_keys: Iterable[str]) -> int:
        args = evicting_args(pod_uid, in_progress, slot_keys)
        return int(await self._evicting(keys=[self.prefix], args=args))

    def ready_key(self, workload_key: str) -> str:
        """The set of a workload's Ready pods (by its slot key, `workload:Kind/namespace/name`)."""
        return f"{self.prefix}:ready:{workload_key}"

    async def pod_ready(
        self, ident: str, resource_version: str, uid: str, *, ready: bool, workload_key: str, deleted: bool
    ) -> bool:
        """Apply one pod event to its workload's Ready set (`workload_key` is the workload's slot key, "" for
        a pod of none). False if a newer event of the pod was applied already."""
        args = ready_args(
            ident, resource_version, uid, ready=ready, workload_key=workload_key, deleted=deleted
        )
        return bool(await self._pod_ready(keys=[self.prefix], args=args))

    # ----------------------------------------------------------------------------------------------------
    # Completeness: the marker, and rebuilding from the jobs that are running

    async def is_complete(self) -> bool:
        return bool(await self.client.exists(f"{self.prefix}:marker"))

    async def generation(self) -> str | None:
        """The complete ledger's generation (a new one after every rebuild), or None while it is not."""
        value = await self.client.get(f"{self.prefix}:marker")
        return as_text(value) if value is not None else None

    async def rebuild(self, running: Iterable[HeldJob]) -> int:
        """Restore the slots and claims of `running` jobs (from their PMJs), then mark the ledger complete."""
        pipe = self.client.pipeline(transaction=True)
        count = 0
        jobs = list(running)
        for job in jobs:
            for key in job.slot_keys:
                pipe.sadd(self.slot_set(key), job.job_uid)
            pipe.hset(f"{self.prefix}:claims", job.pod_uid, job.job_uid)
            pipe.hset(
                f"{self.prefix}:job:{job.job_uid}",
                mapping={"pod": job.pod_uid, "slots": json.dumps(list(job.slot_keys)), "admitted": "rebuilt"},
            )
            pipe.zadd(f"{self.prefix}:expiry", {job.job_uid: 0}, nx=True)
            count += 1
        await pipe.execute()
        # Which of them stand for a replica that is not Ready (the Ready sets were refilled before this).
        held = [
            [j.job_uid, j.pod_uid, key] for j in jobs for key in j.slot_keys if workload_of(key) is not None
        ]
        if held:
            await self._track_gone(keys=[self.prefix], args=[json.dumps(held)])
        # A new generation: decisions made again after Redis lost the ledger are new messages, not
        # duplicates JetStream would drop (the same job admitted again must reach the tracker again).
        await self.client.set(f"{self.prefix}:marker", uuid.uuid4().hex[:12])
        # Rebuilt jobs expire a full TTL from now, by the ledger's clock.
        seconds, micros = await self.client.time()
        now = seconds + micros / 1e6
        found: list[Any] = await self.client.zrangebyscore(f"{self.prefix}:expiry", 0, 0)
        members = [as_text(m) for m in found]
        if members:
            await self.client.zadd(f"{self.prefix}:expiry", dict.fromkeys(members, now + self.slot_ttl))
        return count

    async def usage(self) -> tuple[dict[str, set[str]], set[str]]:
        """What each limit's set holds now (jobs and pods evicting in the background), by slot key
        (`node:n1`, `workload:...`), and the pods being evicted in the background (seed 003)."""
        used: dict[str, set[str]] = {}
        evicting: set[str] = set()
        for part in ("slots", "evicting"):
            head = f"{self.prefix}:{part}:"
            async for raw in self.client.scan_iter(match=f"{head}*", count=1000):
                key = as_text(raw)
                members = {as_text(m) for m in await self.client.smembers(key)}
                used.setdefault(key[len(head) :], set()).update(members)
                if part == "evicting":
                    evicting |= members
        return {k: v for k, v in used.items() if v}, evicting

    async def snapshot(self) -> dict[str, Any]:
        """Slots and claims as plain data (for checks, metrics and tests)."""
        slots: dict[str, list[str]] = {}
        async for key in self.client.scan_iter(match=self.slot_set("*"), count=1000):
            name = as_text(key)[len(self.prefix) + len(":slots:") :]
            slots[name] = sorted(as_text(m) for m in await self.client.smembers(key))
        raw_claims = await self.client.hgetall(f"{self.prefix}:claims")
        claims = {as_text(k): as_text(v) for k, v in raw_claims.items()}
        return {"slots": {k: v for k, v in slots.items() if v}, "claims": claims}


def _round(candidates: Sequence[Candidate]) -> bytes:
    """The admission script's jobs, as one JSON document: each distinct slot and token bucket once (the jobs
    of a round share most of theirs: the cluster's, a workload's, a namespace's), and each job's plan
    naming them by their place in those lists (1-based, as Lua counts)."""
    slots: dict[tuple[Any, ...], int] = {}
    buckets: dict[tuple[Any, ...], int] = {}
    jobs = []
    for c in candidates:
        plan: dict[str, Any]
        if c.drop:
            plan = {"drop": 1}
        elif c.reject is not None:
            plan = {"reject": c.reject}
        elif c.wait is not None:
            plan = {"wait": c.wait}
        else:
            plan = {
                "s": [slots.setdefault(_slot_entry(s), len(slots) + 1) for s in c.slots],
                "b": [
                    buckets.setdefault((b.rule, b.key, b.rate, b.burst, b.what), len(buckets) + 1)
                    for b in c.buckets
                ],
            }
            if c.surge:
                plan["surge"] = 1
        jobs.append((c.job_uid, c.pod_uid, plan))
    return msgspec.json.encode({"slots": list(slots), "buckets": list(buckets), "jobs": jobs})


def _slot_entry(s: Slot) -> tuple[Any, ...]:
    if s.replicas is None:
        return (s.rule, s.key, s.limit, s.what)
    return (s.rule, s.key, s.limit, s.what, s.replicas)
