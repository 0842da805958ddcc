"""The arbitrator's engine: facts in, queue maintained, admission passes over the queue's head, decisions out.

State lives in Redis only (facts, queue, ledger), so replicas are interchangeable. A pass reads the head of
the queue, drops jobs the filters now forbid, plans the rest from current facts and hands them, in order, to
one atomic ledger step; if another replica changed the head meanwhile the step is refused and the pass
reads the head again. So admissions happen in the queue's order whatever the number of replicas.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from prometheus_client import Gauge, Histogram

from services.arbitrator.candidates import Prepared
from services.arbitrator.decisions import Decisions, Publisher
from services.arbitrator.fact_store import FactStore
from services.arbitrator.gather import Gatherer, Loaded
from services.arbitrator.keys import ArbitratorKeys
from services.arbitrator.pod_events import PodEvents
from services.arbitrator.round_reader import RoundReader
from services.arbitrator.rounds import run_rounds
from services.arbitrator.rules import order
from shared.api.messages import EventHead
from shared.api.names import ANNOTATION_ABORT
from shared.api.pmj import PHASE_PENDING, REASON_INVALID_SPEC, PodMigrationJob
from shared.api.validation import validate_pmj
from shared.api.workload_kinds import BUILTIN
from shared.config.model import MigrationControllerArgs, PodherdConfig
from shared.config.windows import Windows
from shared.ledger.slots import pdb_slot, workload_slot
from shared.ledger.stats import MigrationStats
from shared.ledger.store import DEFERRED, Ledger, Verdict
from shared.redis import client as redis_client
from shared.rules import filters
from shared.rules.facts import JobFacts, PodInfo, facts_of, queued_facts, queued_record

log = logging.getLogger(__name__)


QUEUE = Gauge("podherd_arbitrator_queue_jobs", "Jobs waiting for admission")
PASS_SECONDS = Histogram(
    "podherd_arbitrator_pass_seconds",
    "One admission pass",
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1),
)

# Outcomes taken off the queue are published by the replica that took them; another replica re-publishes
# them only when they are older than this (the first one probably died).
ANNOUNCE_AFTER = 5.0
# How often a busy replica fires the ledger's timers at least (token buckets refilled, facts awaited).
TICK = 0.05


class Engine:
    def __init__(
        self,
        config: PodherdConfig,
        facts: FactStore,
        ledger: Ledger,
        *,
        publisher: Publisher,
        subject: Callable[[str, str], str],
        audit_subject: Callable[[str], str],
    ) -> None:
        self.config = config
        self.args = config.migration_controller
        self.facts = facts
        self.ledger = ledger
        self.publisher = publisher
        self.redis = ledger.client
        self.keys = ArbitratorKeys(config.redis.key_prefix)
        self.pods = PodEvents(ledger.client, facts, ledger_prefix=ledger.prefix, keys=self.keys)
        stats = MigrationStats(ledger.client, config.redis.key_prefix)
        self.gather = Gatherer(facts, stats, ledger)
        # What is decided is acted on once Redis replicas hold it (a failover must not lose an admission).
        self.durability = redis_client.durability(ledger.client, config.redis)
        self.decisions = Decisions(
            ledger,
            self.keys,
            publisher,
            durability=self.durability,
            replica=config.replica,
            subject=subject,
            audit_subject=audit_subject,
        )
        self.rounds = RoundReader(
            self.redis,
            self.keys,
            self.gather,
            args=self.args,
            windows=Windows(self.args.disruption_windows),
            workload_kinds=frozenset((*BUILTIN, *(k.name for k in config.watcher.workload_kinds))),
        )
        self.next_timer: float | None = None  # seconds until the ledger's next timer, as of the last pass
        self._timed = False  # this pass parked a job on a timer (a token, facts awaited)
        self._sweep_cursor = 0
        self._last_announce_check = 0.0
        self._last_tick = -TICK
        self._last_gauge = 0.0

    # ----------------------------------------------------------------------------------------------------
    # Jobs in

    async def on_job(self, job: PodMigrationJob, deleted: bool, error: str | None) -> None:
        await self.on_jobs([(job, deleted, error)])

    async def on_jobs(self, events: list[tuple[PodMigrationJob, bool, str | None]]) -> None:
        """Job events, in order (event, deleted, decode error), in a few round trips for the whole batch. A
        job's last event says what becomes of it (queued or re-ranked, or out of the queue), so a job that
        moves on (each status write of a running job is an event) costs one step per batch, not per event.
        An invalid job is rejected as its event comes."""
        latest: dict[str, tuple[PodMigrationJob, bool]] = {}
        for job, deleted, error in events:
            uid = job.metadata.uid or ""
            if not uid:
                continue
            latest.pop(uid, None)
            if error is not None:
                await self._invalid(job, error)
            else:
                latest[uid] = (job, deleted)
        incoming: dict[str, PodMigrationJob] = {}
        leaving: list[str] = []
        gone: list[str] = []
        for uid, (job, deleted) in latest.items():
            annotations = job.metadata.annotations or {}
            finished = deleted or job.metadata.deletion_timestamp is not None or job.phase != PHASE_PENDING
            if finished or ANNOTATION_ABORT in annotations or job.spec.paused:
                # Koordinator #3030 retried deleted jobs forever: a job that is gone, done, aborted or
                # paused leaves the queue at once (a paused one comes back when unpaused).
                leaving.append(uid)
                if deleted:
                    gone.append(uid)
            else:
                incoming[uid] = job
        await self.ledger.queue.dequeue(*leaving)
        if gone:
            await self.redis.hdel(self.keys.decided, *gone)
            await self.ledger.forget(*gone)
        await self._queue(incoming)

    async def _invalid(self, job: PodMigrationJob, error: str) -> None:
        uid, name = job.metadata.uid or "", job.metadata.name or ""
        if not await self.redis.hexists(self.keys.decided, uid):
            await self.decisions.reject_now(
                name, uid, filters.Rejection("InvalidSpec", REASON_INVALID_SPEC, error)
            )

    async def _queue(self, incoming: dict[str, PodMigrationJob]) -> None:
        if not incoming:
            return
        uids = list(incoming)
        decided = await self.redis.hmget(self.keys.decided, uids)
        jobs = []
        for uid, seen in zip(uids, decided, strict=True):
            if seen is not None:
                continue  # arbitrated once: a replayed or re-ranking event must not queue it again
            job = incoming[uid]
            invalid = validate_pmj(job)
            if invalid is not None:
                rejection = filters.Rejection(invalid.reason, invalid.reason, invalid.message)
                await self.decisions.reject_now(job.metadata.name or uid, uid, rejection)
            else:
                jobs.append(facts_of(job, self.args.default_job_mode))
        await self._enqueue(jobs)

    async def _enqueue(self, jobs: list[JobFacts]) -> None:
        """Queue (or re-rank) jobs at their sort keys, keeping what the rules read of each (its facts)."""
        if not jobs:
            return
        now = repr(time.time())
        loaded_jobs = await self.gather.load(jobs, with_migrating=True)
        # Released even when cancelled before its reply: it carries a script, loaded before it is sent.
        async with self.redis.pipeline(transaction=False) as pipe:
            entries = []
            for loaded in loaded_jobs:
                facts = loaded.facts
                key = _rank(loaded, self.args, self.config.arbitrator.sort_order)
                pipe.hset(self.keys.jobs, facts.uid, queued_record(facts))
                pipe.hsetnx(self.keys.since, facts.uid, now)
                pipe.hset(self.keys.pod_jobs, f"{facts.pod_namespace}/{facts.pod_name}", facts.uid)
                entries.append((facts.uid, order.lex_key(key)))
            await self.ledger.queue.enqueue_many(entries, pipe)
            await pipe.execute()

    async def on_pods(self, events: Sequence[tuple[EventHead, PodInfo]]) -> None:
        """A fetch's pod events, in order (`PodEvents`); a queued job of a pod that changed is ranked again,
        now that its facts are known."""
        changed = await self.pods.apply(events)
        for job_uid in await self.pods.evicting(changed):
            facts = await self._job(job_uid)
            if facts is not None and await self.redis.hexists(self.ledger.keys.key("queued"), job_uid):
                await self._enqueue([facts])

    # ----------------------------------------------------------------------------------------------------
    # Admission passes

    async def admit_pass(self) -> int:
        """Admit what fits now, in queue order; how many were admitted. Each round takes the ready queue's
        head to the ledger in one atomic step, every job leaving it (decided, or parked on the gate that
        deferred it): a round never looks at a job twice, and a decision's cost does not grow with the jobs
        waiting."""
        started = time.perf_counter()
        if time.monotonic() - self._last_announce_check > 1.0:
            self._last_announce_check = time.monotonic()
            await self.decisions.announce_pending(older_than=ANNOUNCE_AFTER)
        clock = time.monotonic()
        due = self.next_timer is not None and clock - self._last_tick >= self.next_timer
        if due or clock - self._last_tick >= TICK:  # timers fired at most every TICK, or when one is due
            self._last_tick = clock
            self.next_timer = await self.ledger.queue.tick()
        self._timed = False
        admitted = await run_rounds(
            self.ledger,
            self.config.arbitrator.scan_depth,
            read=self.rounds.read,
            make=self.rounds.make,
            admit=self._admit,
            tell=self.decisions.tell,
        )
        if self._timed:  # the loop wakes when that timer is due, not at the next arbitration interval
            self._last_tick, self.next_timer = time.monotonic(), await self.ledger.queue.tick()
        if clock - self._last_gauge >= 1.0:
            self._last_gauge = clock
            QUEUE.set(await self.ledger.queue.length())
        PASS_SECONDS.observe(time.perf_counter() - started)
        return admitted

    async def _admit(self, batch: list[Prepared]) -> list[Verdict] | None:
        verdicts = await self.ledger.admit_batch([b.candidate for b in batch], from_queue=True)
        if verdicts is not None and any(v.gate.startswith(("bucket:", "timer")) for v in verdicts):
            self._timed = True  # parked until a token or fact is due
        if verdicts is not None and any(v.outcome != DEFERRED for v in verdicts):
            # Not durable: raised before any is told; they are told once it is (`announce_pending`).
            await self.durability.confirm()
        return verdicts

    async def sweep(self) -> None:
        """The safety net at the arbitration interval: look again at the best waiter of some gates."""
        self._sweep_cursor = await self.ledger.queue.sweep(
            self._sweep_cursor, self.config.arbitrator.scan_depth
        )

    async def on_facts(self, kind: str, ident: str) -> None:
        """A workload or budget changed: limits derived from it may have grown."""
        if kind == "pdb":
            await self.ledger.queue.wake_slots([pdb_slot(ident)])
        elif kind == "workload":
            await self.ledger.queue.wake_slots([workload_slot(ident)])

    async def _job(self, uid: str) -> JobFacts | None:
        data = await self.redis.hget(self.keys.jobs, uid)
        return queued_facts(data, self.args.default_job_mode) if data else None


def _rank(loaded: Loaded, args: MigrationControllerArgs, sort_order: str) -> order.SortKey:
    """A queued job's sort key. Until its pod is known (its event may come after the job's), the job is
    ranked by what it says itself; the pod's arrival re-ranks it (`on_pod`)."""
    facts = loaded.facts
    subject = loaded.pod or PodInfo(uid="", namespace=facts.pod_namespace, name=facts.pod_name)
    return order.sort_key(
        facts,
        subject,
        loaded.workload,
        migrating_in_workload=loaded.migrating,
        order=sort_order,
        stays=order.asks_to_stay(subject, args),
    )
