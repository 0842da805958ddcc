"""The arbitrator service: consume the watcher's events, keep facts and the queue, admit in passes.

Passes are event-driven: any job, pod, workload or budget change, and any slot released (the tracker
publishes on `p.ledger.released`), wakes the loop within milliseconds; token buckets and facts awaited wake
it by the ledger's timers; the arbitration interval (`arbitrationArgs.interval`, 500 ms) is the fallback,
which also looks again at the best parked job of each gate.

Fail closed: when the ledger's marker is missing (Redis restarted or flushed) nothing is admitted until one
replica has rebuilt it from the PodMigrationJobs that are Running (their `podherd.io/ledger` annotation,
written when a job starts, names the pod and slots it holds).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import msgspec
import redis.asyncio as aioredis
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from prometheus_client import Gauge

from services.arbitrator.engine import Engine
from services.arbitrator.fact_store import FactStore
from services.arbitrator.rebuild import API_OUTAGE, LedgerRebuild
from shared.api import codec
from shared.api.messages import EventHead, ObjectEvent, PdbInfo, PodInfo, WorkloadInfo
from shared.api.pmj import PodMigrationJob
from shared.config.model import PodherdConfig
from shared.core.backoff import Backoff
from shared.core.durations import parse_duration
from shared.core.waits import wait_event, when_set
from shared.kube.client import KubeClient
from shared.ledger.slots import limit_of
from shared.ledger.store import Ledger
from shared.nats import bus
from shared.nats.consume import durable, run_consumer
from shared.nats.publisher import Publisher
from shared.redis import client as redis_client
from shared.redis.client import redis_address
from shared.service.links import Link, linked
from shared.service.ops import OpsServer

log = logging.getLogger(__name__)
T = TypeVar("T")
Outcomes = list[BaseException | None]  # per message of a fetch: None (done) or why not
CONSUMER = "arbitrator"
# What the API server raises when it does not answer or refuses (its client errors are OSErrors too).
FACT_KINDS = ("pods", "poddisruptionbudgets", "deployments", "statefulsets", "replicasets", bus.WORKLOADS)
USAGE_INTERVAL = 5.0
# A batch of events waits this long once its first event is in, for those that come with it: applying them
# costs a few Redis round trips per batch, and the watcher publishes a change's events in a burst.
BATCH_LINGER = 0.01
# A pass waiting longer than this on Redis (stopped, not gone) is given up and the next one starts.
PASS_DEADLINE = 30.0
LIMIT_KINDS = ("global", "node", "namespace", "workload", "pdb")
SLOTS_IN_USE = Gauge(
    "podherd_ledger_slots_in_use",
    "Migrations (and background evictions) each limit counts now, summed over its objects",
    ["limit"],
)
EVACUATIONS_IN_PROGRESS = Gauge(
    "podherd_pod_evacuations_in_progress", "Pods being evicted in the background (KEP-1397), from the ledger"
)


class Arbitrator:
    def __init__(
        self, config: PodherdConfig, nc: NatsClient, client: aioredis.Redis, *, kube: KubeClient | None
    ) -> None:
        self.config = config
        self.nc = nc
        self.js = nc.jetstream()
        self.subjects = bus.Subjects(config.nats.subject_prefix)
        self.set_up = bus.SetUp("arbitrator")
        self.client = client
        self.facts = FactStore(client, config.redis.key_prefix)
        self.ledger = Ledger(client, config.redis.key_prefix, parse_duration(config.arbitrator.slot_ttl))
        self.engine = Engine(
            config,
            self.facts,
            self.ledger,
            publisher=Publisher(nc),
            subject=self.subjects.job,
            audit_subject=self.subjects.audit,
        )
        self.wake = asyncio.Event()
        self.redis_down = Backoff("Redis", redis_address(config.redis))
        self.api_down = Backoff("the Kubernetes API server", kube.api.configuration.host if kube else "")
        self.nats_down = Backoff("NATS", config.nats.url)
        self._windows_checked = False
        self.rebuild = LedgerRebuild(config, self.ledger, self.engine, kube=kube, replay=self._replay)

    async def _replay(self) -> int:
        """What Redis lost with the ledger (facts, pending jobs) from the last event of every object on the
        events stream, through the ordinary event path: facts first, then the jobs (pending ones are queued
        again; those already running are in the ledger's rebuild). Returns how many events were replayed."""
        replayed = 0
        for kind in (*FACT_KINDS, "podmigrationjobs"):
            stream = self.subjects.events_stream
            async for chunk in bus.last_per_subject(self.js, stream, self.subjects.events_of(kind)):
                for outcome in await self.handle_batch(chunk):
                    if outcome is not None:
                        raise outcome
                replayed += len(chunk)
        return replayed

    async def setup(self) -> Any:
        await bus.ensure_events_stream(self.js, self.subjects, self.config.nats)
        await bus.ensure_work_streams(self.js, self.subjects, self.config.nats)
        kinds = (*FACT_KINDS, "podmigrationjobs")
        return await durable(
            self.nc,
            self.subjects.events_stream,
            CONSUMER,
            filters=[self.subjects.events_of(k) for k in kinds],
            config=self.config.nats,
        )

    # ----------------------------------------------------------------------------------------------------

    async def handle_batch(self, messages: list[Any]) -> Outcomes:
        """One fetch of events, in order: consecutive job events are queued together and consecutive pod
        events applied together (a few round trips for each run of them), every other event one by one."""
        outcomes: Outcomes = [None] * len(messages)
        jobs: list[tuple[int, ObjectEvent[PodMigrationJob]]] = []
        pods: list[tuple[int, tuple[EventHead, PodInfo]]] = []

        for index, msg in enumerate(messages):
            try:
                head = codec.decode(msg.data, EventHead)
                if head.kind == "PodMigrationJob":
                    await _apply_run(pods, self.engine.on_pods, outcomes)
                    jobs.append((index, codec.decode(msg.data, ObjectEvent[PodMigrationJob])))
                    continue
                await _apply_run(jobs, self._queue_jobs, outcomes)
                if head.kind == "Pod":
                    pods.append((index, (head, codec.decode(msg.data, ObjectEvent[PodInfo]).object)))
                    continue
                await _apply_run(pods, self.engine.on_pods, outcomes)
                await self._handle_fact(msg, head)
            except Exception as exc:
                outcomes[index] = exc
        await _apply_run(pods, self.engine.on_pods, outcomes)
        await _apply_run(jobs, self._queue_jobs, outcomes)
        self.wake.set()
        return outcomes

    async def _queue_jobs(self, events: list[ObjectEvent[PodMigrationJob]]) -> None:
        await self.engine.on_jobs([(e.object, e.type == "DELETED", e.error) for e in events])

    async def _handle_fact(self, msg: Msg, head: EventHead) -> None:
        deleted = head.type == "DELETED"
        ident = head.ident
        if head.kind == "PodDisruptionBudget":
            pdb = codec.decode(msg.data, ObjectEvent[PdbInfo]).object
            if await self.facts.put("pdb", ident, head.resource_version, fact=None if deleted else pdb):
                await self.engine.on_facts("pdb", ident)
        else:  # a workload, of a built-in kind or a configured one
            workload = codec.decode(msg.data, ObjectEvent[WorkloadInfo]).object
            key = f"{head.kind}/{ident}"
            if await self.facts.put(
                "workload", key, head.resource_version, fact=None if deleted else workload
            ):
                await self.engine.on_facts("workload", key)

    async def windows_configured(self) -> None:
        """Jobs parked until an opening of windows configured otherwise are looked at again now."""
        engine = self.engine
        digest = hashlib.sha1(msgspec.json.encode(engine.args.disruption_windows)).hexdigest()
        if await self.client.set(engine.keys.windows, digest, get=True) not in (digest, digest.encode()):
            engine.next_timer = await self.ledger.queue.tick(rewind=True)

    async def admission_loop(self, stop: asyncio.Event) -> None:
        """A pass on every wake-up (events, releases), at the ledger's next timer (a token due, facts
        awaited), and at the arbitration interval at the latest, which also sweeps the parked jobs."""
        interval = self.config.migration_controller.arbitration_interval_seconds
        swept = time.monotonic()
        stopping = when_set(stop, self.wake.set)  # stopping wakes the loop, as a change does
        try:
            await self._admitting(stop, interval, swept)
        finally:
            stopping.cancel()

    async def _admitting(self, stop: asyncio.Event, interval: float, swept: float) -> None:
        while not stop.is_set():
            timeout = interval
            if self.engine.next_timer is not None:
                timeout = max(0.001, min(interval, self.engine.next_timer))
            await wait_event(self.wake, timeout)
            self.wake.clear()
            if stop.is_set():
                break
            try:
                async with asyncio.timeout(PASS_DEADLINE):
                    if not await self.rebuild.ensure_ledger():
                        continue
                    if not self._windows_checked:  # once, when Redis first answers (not at start: it may not)
                        await self.windows_configured()
                        self._windows_checked = True
                    if time.monotonic() - swept >= interval:
                        swept = time.monotonic()
                        await self.engine.sweep()
                    await self.engine.admit_pass()
            except (*redis_client.OUTAGE, *API_OUTAGE, bus.StreamUnreadable) as exc:  # one line, a backoff
                down = self._down(exc)
                if not await down.pause(stop, exc):
                    break
                self.wake.set()
                continue
            except Exception:
                log.exception("admission pass failed")
                await asyncio.sleep(0.2)
            for each in (self.redis_down, self.api_down, self.nats_down):
                each.answered()

    def _down(self, exc: BaseException) -> Backoff:
        """Whose outage (the API server's client errors are OSErrors too: its, not Redis's)."""
        if isinstance(exc, API_OUTAGE):
            return self.api_down
        return self.nats_down if isinstance(exc, bus.StreamUnreadable) else self.redis_down

    async def run(self, stop: asyncio.Event) -> None:
        sub = await bus.prepared(stop, self.setup, "arbitrator", state=self.set_up)
        if sub is None:
            return
        released = await self.nc.subscribe(self.subjects.ledger_released, cb=self._on_release)
        try:
            # One part failing takes the others down: the process exits and is restarted whole.
            async with asyncio.TaskGroup() as group:
                group.create_task(
                    run_consumer(
                        sub,
                        self.js,
                        self.subjects,
                        name=CONSUMER,
                        handle=self.handle_batch,
                        stop=stop,
                        durable=self.engine.durability.confirm,
                        linger=BATCH_LINGER,
                    )
                )
                group.create_task(self.admission_loop(stop))
                group.create_task(self.report_usage(stop))
        finally:
            await released.unsubscribe()

    async def report_usage(self, stop: asyncio.Event, every: float = USAGE_INTERVAL) -> None:
        """Ledger gauges: slots in use by limit, and pods being evicted in the background (KEP-1397)."""
        while not stop.is_set():
            try:
                used, evicting = await self.ledger.usage()
            except Exception as exc:  # Redis away: the admission loop reports and recovers; keep the gauges
                log.debug("ledger usage unavailable: %s", exc)
            else:
                by_limit: dict[str, int] = dict.fromkeys(LIMIT_KINDS, 0)
                for key, members in used.items():
                    kind = limit_of(key)
                    by_limit[kind] = by_limit.get(kind, 0) + len(members)
                for kind, count in by_limit.items():
                    SLOTS_IN_USE.labels(kind).set(count)
                EVACUATIONS_IN_PROGRESS.set(len(evicting))
            await wait_event(stop, every)

    async def _on_release(self, _: Any) -> None:
        self.wake.set()


async def _apply_run(
    run: list[tuple[int, T]], apply: Callable[[list[T]], Awaitable[None]], outcomes: Outcomes
) -> None:
    """Apply a run of consecutive events of one kind together; should that fail, each of them fails."""
    if run:
        try:
            await apply([item for _, item in run])
        except Exception as exc:
            for index, _ in run:
                outcomes[index] = exc
        run.clear()


async def main(config: PodherdConfig, stop: asyncio.Event, ops: OpsServer) -> None:
    async with linked("arbitrator", config, stop, ops=ops, redis=Link.UNCHECKED, kube=Link.OPTIONAL) as links:
        arbitrator = Arbitrator(config, links.nats, links.redis, kube=links.kube_client)

        async def ledger_ready() -> str | None:
            try:
                complete = await arbitrator.ledger.completeness.is_complete()
            except Exception as exc:
                return f"Redis unavailable: {exc}"
            return None if complete else "the ledger is being rebuilt"

        ops.add_check("jetstream", arbitrator.set_up.check)
        ops.add_check("ledger", ledger_ready)
        await arbitrator.run(stop)
