"""The admission ledger in Redis: slots, token buckets and pod claims, changed only by atomic scripts.

Its keys are named in shared/ledger/keys.py, all under one hash tag, so each script touches one Redis Cluster
slot. Slots are sets of job UIDs: a retried admission cannot take a slot twice, and a release removes
exactly what the job took (recorded with the job at admission). A slot whose job vanished without a
release expires after `arbitrator.slotTTL`. The ledger has two parts of its own: its pending jobs
(`ledger.queue`, shared/ledger/queue.py) and its completeness (`ledger.completeness`,
shared/ledger/rebuild.py: until it is rebuilt after Redis lost it, `admit` refuses everything, "closed").

The scripts implement `services.arbitrator.rules.limits.evaluate`; the tests hold them to it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec
import redis.asyncio as aioredis

from shared.api.names import ANNOTATION_LEDGER
from shared.ledger.keys import LedgerKeys
from shared.ledger.queue import PendingJobs
from shared.ledger.rebuild import Completeness, HeldJob
from shared.ledger.scripts import as_text, lua_script
from shared.ledger.slots import Bucket, Slot

ADMITTED = "admitted"
DEFERRED = "deferred"
FORBIDDEN = "forbidden"
REJECTED = "rejected"
CLOSED = "closed"


# What the ledger counts of pods (background evictions, each workload's Ready pods), kept by two scripts
# that those applying many pod events at once run in their own pipelines, with these arguments.
EVICTING_SCRIPT = ("evicting.lua", "parking.lua")
POD_READY_SCRIPT = ("pod_ready.lua", "parking.lua", "versions.lua")


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


def recorded(job_uid: str, annotations: Mapping[str, str]) -> HeldJob | None:
    """What a PMJ's annotation says its job holds; None without one, or with one no Podherd wrote."""
    try:
        data = json.loads(annotations[ANNOTATION_LEDGER])
        return HeldJob(job_uid, str(data["pod"]), tuple(str(key) for key in data["slots"]))
    except (KeyError, TypeError, ValueError):
        return None


class Ledger:
    def __init__(self, client: aioredis.Redis, key_prefix: str, slot_ttl: float) -> None:
        self.client = client
        self.keys = LedgerKeys.of(key_prefix)
        self.slot_ttl = slot_ttl
        self.queue = PendingJobs(client, self.keys)
        self.completeness = Completeness(client, self.keys, slot_ttl)
        self._admit = client.register_script(lua_script("admit.lua", "parking.lua"))
        self._release = client.register_script(lua_script("release.lua", "parking.lua"))
        self._evicting = client.register_script(lua_script(*EVICTING_SCRIPT))
        self._pod_ready = client.register_script(lua_script(*POD_READY_SCRIPT))

    @property
    def prefix(self) -> str:
        """The ledger's keys' common prefix (its hash tag), the scripts' KEYS[1]."""
        return self.keys.prefix

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

    async def release(self, job_uid: str) -> bool:
        """Free what `job_uid` holds. True only the first time (so callers can count releases exactly)."""
        return bool(await self._release(keys=[self.prefix], args=[job_uid]))

    async def forget(self, *job_uids: str) -> None:
        """The jobs' PMJs are gone: stop remembering that they were admitted once."""
        if job_uids:
            await self.client.srem(self.keys.key("done"), *job_uids)

    async def held(self, job_uid: str) -> HeldJob | None:
        """What the job holds now (None: nothing, released or never admitted)."""
        pod, slots = await self.client.hmget(self.keys.member("job", job_uid), ["pod", "slots"])
        if pod is None or slots is None:
            return None
        return HeldJob(job_uid, as_text(pod), tuple(json.loads(slots)))

    async def held_slots(self, job_uid: str) -> tuple[list[str], bool]:
        """The slot keys an admitted job holds, and whether it was admitted to move by Surge."""
        record, surge = await self.client.hmget(self.keys.member("job", job_uid), ["slots", "surge"])
        return (list(json.loads(record)) if record else []), surge is not None

    async def set_evicting(self, pod_uid: str, in_progress: bool, slot_keys: Iterable[str]) -> int:
        args = evicting_args(pod_uid, in_progress, slot_keys)
        return int(await self._evicting(keys=[self.prefix], args=args))

    async def pod_ready(
        self, ident: str, resource_version: str, uid: str, *, ready: bool, workload_key: str, deleted: bool
    ) -> bool:
        """Apply one pod event to its workload's Ready set (`workload_key` is the workload's slot key, "" for
        a pod of none). False if a newer event of the pod was applied already."""
        args = ready_args(
            ident, resource_version, uid, ready=ready, workload_key=workload_key, deleted=deleted
        )
        return bool(await self._pod_ready(keys=[self.prefix], args=args))

    async def usage(self) -> tuple[dict[str, set[str]], set[str]]:
        """What each limit's set holds now (jobs and pods evicting in the background), by slot key
        (`node:n1`, `workload:...`), and the pods being evicted in the background."""
        used: dict[str, set[str]] = {}
        evicting: set[str] = set()
        for part in ("slots", "evicting"):
            head = self.keys.member(part, "")
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
        head = self.keys.member("slots", "")
        async for key in self.client.scan_iter(match=f"{head}*", count=1000):
            slots[as_text(key)[len(head) :]] = sorted(as_text(m) for m in await self.client.smembers(key))
        raw_claims = await self.client.hgetall(self.keys.key("claims"))
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
