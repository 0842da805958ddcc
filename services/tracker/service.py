"""The tracker: drives every job from the events that concern it and writes its story into the PMJ status.

Triggers (all event-driven): the job's own events, its pod's and Reservation's events, the replacement
pod's (it carries the Reservation's name, which is the job's), the arbitrator's decisions, the executor's
reports, and the job's deadline (`spec.ttl`, default `defaultJobTTL`). On any of them the job is
reconciled: its live objects are read, `jobs.machine.progress` decides the next status and actions, the
status is written with optimistic concurrency (a 409 re-reads and decides again), commands go to the
executor, and an ended job's ledger slots are released exactly once. A per-job lock in Redis makes one
replica at a time handle a job; a message for a job another replica holds is redelivered a moment later.

Every status change is an audit record (`p.audit.<job>`, action `transition`) and a Kubernetes Event on the
PMJ. Intents from external systems are turned into jobs here too (`intake/`).

Abort a job with the annotation `podherd.io/abort` (any value, e.g. the reason): it ends Aborted, what it
created is cleaned up, and nothing is evicted afterwards.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

import redis.asyncio as aioredis
from nats.aio.client import Client as NatsClient

from services.tracker.collector.collecting import Collector
from services.tracker.intake.atomic import AtomicDrains
from services.tracker.intake.atomic_plans import AtomicPlans
from services.tracker.intake.drains import Drains
from services.tracker.intake.intents import IntentIntake
from services.tracker.intake.node_fit import NodeFit
from services.tracker.intake.requesters import Requesters
from services.tracker.intake.reserved_ahead import settle_each
from services.tracker.jobs.effects import Effects
from services.tracker.jobs.endings import Endings
from services.tracker.jobs.locks import JobLocks, announcer
from services.tracker.jobs.observer import Observer
from services.tracker.jobs.periodic import Periodic
from services.tracker.jobs.reconciler import LOCK_MS, JobParts, Reconciler
from services.tracker.jobs.state import JobState
from services.tracker.jobs.triggers import Triggers
from services.tracker.keys import TrackerKeys
from shared.config.model import PodherdConfig
from shared.core.durations import parse_duration
from shared.kube.client import KubeClient
from shared.ledger.stats import MigrationStats
from shared.ledger.store import Ledger
from shared.nats import bus
from shared.nats.consume import Durable, coalesced, durable, run_consumer
from shared.nats.keyed import Coalescing
from shared.nats.publisher import Publisher
from shared.redis import client as redis_client
from shared.service.links import Link, linked
from shared.service.ops import OpsServer

log = logging.getLogger(__name__)
EVENTS_CONSUMER, JOBS_CONSUMER = "tracker", "tracker-jobs"  # durable names: the cluster's objects, the jobs'
# Jobs one replica reconciles at once: each waits mostly on the API server and Redis, and jobs are
# independent of each other (a per-job lock in Redis keeps one replica at a time on a job).
RECONCILES_AT_ONCE = 64
# Batches of messages taken while earlier ones are handled: a reconcile waiting on the API server or on its
# job's lock holds up no other job's.
BATCHES_AT_ONCE = 64


class Tracker:
    reconciler_type: type[Reconciler] = Reconciler

    def __init__(
        self, config: PodherdConfig, nc: NatsClient, client: aioredis.Redis, *, kube: KubeClient
    ) -> None:
        self.config = config
        self.args = config.migration_controller
        self.nc = nc
        self.js = nc.jetstream()
        self.client = client
        self.kube = kube
        self.subjects = bus.Subjects(config.nats.subject_prefix)
        self.set_up = bus.SetUp("tracker")
        self.publisher = Publisher(nc)
        self.ledger = Ledger(client, config.redis.key_prefix, parse_duration(config.arbitrator.slot_ttl))
        self.keys = TrackerKeys(config.redis.key_prefix)
        self.stats = MigrationStats(client, config.redis.key_prefix)
        self.me = f"{config.replica}-{uuid.uuid4().hex[:8]}"
        announce = announcer(nc, self.subjects.job_unlocked)
        self.locks = JobLocks(
            client, self.keys, self.me, ttl_ms=LOCK_MS, announce=announce, peek=self.keys.ended
        )
        self.state = JobState(client, self.keys, self.args.default_job_ttl)
        self.effects = Effects(config, nc, kube, publisher=self.publisher, subjects=self.subjects)
        self.durability = durability = redis_client.durability(client, config.redis)
        self.observer = Observer(client, self.keys, kube, args=self.args, durability=durability)
        self.endings = Endings(
            client,
            self.keys,
            self.ledger,
            stats=self.stats,
            effects=self.effects,
            state=self.state,
            durability=durability,
        )
        self.reconciler = self.reconciler_type(
            client,
            self.keys,
            kube,
            parts=JobParts(self.observer, self.state, self.effects, self.endings, self.locks),
        )
        self.triggers = Triggers(
            client,
            self.keys,
            state=self.state,
            endings=self.endings,
            observer=self.observer,
            publisher=self.publisher,
            subjects=self.subjects,
        )
        self.periodic = Periodic(
            client,
            self.keys,
            kube,
            reconcile=self.reconcile,
            observer=self.observer,
            state=self.state,
            effects=self.effects,
            redis_address=redis_client.redis_address(config.redis),
        )
        drains = Drains(kube, self.publisher, self.subjects, args=self.args, replica=config.replica)
        requesters = Requesters(kube, config.intents, self.subjects)
        fit = NodeFit(kube, node_selector=self.args.node_selector) if self.args.fit_checked else None
        self.intake = IntentIntake(
            kube,
            self.publisher,
            self.subjects,
            replica=config.replica,
            requesters=requesters,
            drains=drains,
            fit=fit,
        )
        self.collector = Collector(config, client, kube, publisher=self.publisher, js=self.js)
        self.plans = AtomicPlans(client, self.keys, kube, publisher=self.publisher, subjects=self.subjects)
        self.atomic = AtomicDrains(
            client,
            self.keys,
            kube,
            publisher=self.publisher,
            subjects=self.subjects,
            default_ttl=self.args.default_job_ttl,
        )

    async def run(self, stop: asyncio.Event) -> None:
        consumers = await bus.prepared(stop, self.setup, "tracker", state=self.set_up)
        if consumers is None:
            return
        events, decisions = consumers
        unlocked = await self.nc.subscribe(self.subjects.job_unlocked, cb=self.locks.heard)
        try:
            await self._serve(events, decisions, stop)
        finally:
            await unlocked.unsubscribe()

    async def setup(self) -> tuple[Durable, Durable]:
        await bus.ensure_events_stream(self.js, self.subjects, self.config.nats)
        await bus.ensure_work_streams(self.js, self.subjects, self.config.nats)
        kinds = ("pods", "podmigrationjobs", "reservations")
        events = await durable(
            self.nc,
            self.subjects.events_stream,
            EVENTS_CONSUMER,
            filters=[self.subjects.events_of(k) for k in kinds],
            config=self.config.nats,
            max_deliver=-1,
        )
        steps = (*bus.DECISION_STEPS, bus.REPORT_STEP, bus.KICK_STEP)
        decisions = await durable(
            self.nc,
            self.subjects.jobs_stream,
            JOBS_CONSUMER,
            filters=[self.subjects.jobs_at(s) for s in steps],
            config=self.config.nats,
            max_deliver=-1,
        )
        return events, decisions

    async def _serve(self, events: Durable, decisions: Durable, stop: asyncio.Event) -> None:
        # One reconcile of a job at a time, however many messages of either consumer name it.
        runs = Coalescing(self.reconcile, concurrency=RECONCILES_AT_ONCE)
        # One part failing takes the others down: the process exits and is restarted whole.
        async with asyncio.TaskGroup() as group:
            for consumer, name, note in (
                (events, EVENTS_CONSUMER, self.triggers.on_event),
                (decisions, JOBS_CONSUMER, self.triggers.on_job_message),
            ):
                handle = coalesced(note, self.reconcile, concurrency=RECONCILES_AT_ONCE, runs=runs)
                consuming = run_consumer(
                    consumer,
                    self.js,
                    self.subjects,
                    name=name,
                    handle=handle,
                    stop=stop,
                    batches_at_once=BATCHES_AT_ONCE,
                    durable=self.durability.confirm,
                )
                group.create_task(consuming)
            group.create_task(self.intake.serve(self.nc, self.config.nats, stop))
            group.create_task(self.periodic.deadlines(stop))
            group.create_task(self.collector.run(stop))
            settlers = {
                self.keys.atomic_drains: self.atomic.settle,
                self.keys.atomic_plans: self.plans.settle,
            }
            group.create_task(settle_each(self.client, settlers, stop=stop))
            group.create_task(self.periodic.report_phases(stop))
            group.create_task(self.effects.recorder.run(stop))

    async def reconcile(self, name: str) -> None:
        await self.reconciler.reconcile(name)


async def main(config: PodherdConfig, stop: asyncio.Event, ops: OpsServer) -> None:
    async with linked("tracker", config, stop, ops=ops, redis=Link.CHECKED) as links:
        tracker = Tracker(config, links.nats, links.redis, kube=links.kube)

        async def answering() -> str | None:  # ready means a request for a migration finds this replica
            return None if tracker.intake.answering.is_set() else "not answering intents yet"

        ops.add_check("jetstream", tracker.set_up.check)
        ops.add_check("intents", answering)
        await tracker.run(stop)
