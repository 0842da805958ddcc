"""A round of the admission pass as read from Redis (its jobs as queued, when each entered the queue, and
what the rules need to know of them) and made ready for the ledger (each job's candidate, from the rules)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import NamedTuple

import redis.asyncio as aioredis

from services.arbitrator.candidates import Prepared, candidate
from services.arbitrator.gather import Gatherer, Loaded
from services.arbitrator.keys import ArbitratorKeys
from shared.api.workload_kinds import BUILTIN
from shared.config.model import MigrationControllerArgs
from shared.config.windows import Windows
from shared.ledger.scripts import as_text
from shared.ledger.store import Candidate
from shared.rules.facts import queued_facts


class Round(NamedTuple):
    """A round of the queue's head as read: its jobs' facts by position (a job gone is absent)."""

    uids: list[str]
    loaded: dict[int, Loaded]
    since: list[bytes | None]


class RoundReader:
    def __init__(
        self,
        redis: aioredis.Redis,
        keys: ArbitratorKeys,
        gather: Gatherer,
        *,
        args: MigrationControllerArgs,
        windows: Windows,
        workload_kinds: frozenset[str] = frozenset(BUILTIN),
    ) -> None:
        self.redis, self.keys, self.gather = redis, keys, gather
        self.args, self.windows, self.workload_kinds = args, windows, workload_kinds

    async def read(self, uids: list[str]) -> Round:
        """A round's jobs as queued, when each entered the queue, and what the rules need to know of them."""
        pipe = self.redis.pipeline(transaction=False)
        pipe.hmget(self.keys.jobs, uids)
        pipe.hmget(self.keys.since, uids)
        raw_jobs, since = await pipe.execute()
        mode = self.args.default_job_mode
        present = [(i, queued_facts(r, mode)) for i, r in enumerate(raw_jobs) if r]
        loaded = await self.gather.load([j for _, j in present])
        return Round(uids, dict(zip((i for i, _ in present), loaded, strict=True)), since)

    def make(self, read: Round) -> list[Prepared]:
        out = []
        now = time.time()
        moment = datetime.fromtimestamp(now, UTC)
        for i, uid in enumerate(read.uids):
            item = read.loaded.get(i)
            raw_since = read.since[i]
            entered = float(as_text(raw_since)) if raw_since else now
            if item is None:
                out.append(Prepared(Candidate(uid, "", (), (), drop=True), uid, entered))
                continue
            pod = item.pod
            window = self.windows.at(pod.namespace, pod.labels, moment) if self.windows and pod else None
            made = candidate(uid, item, self.args, window=window, now=moment, known=self.workload_kinds)
            name = item.facts.name or uid
            out.append(Prepared(made, name, entered, window=window.opening if window else None))
        return out
