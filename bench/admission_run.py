"""One backlog depth of the arbitrator's admission, measured (`run_depth`): the backlog parked, the burst
admitted as fast as the engine can, arrivals at a rate with their latency, and what it all cost. The
arbitrator benchmark and the security cost comparison both run it."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from datetime import UTC, datetime
from typing import Any

import nats
import redis.asyncio as aioredis

from services.arbitrator.engine import Engine
from services.arbitrator.fact_store import FactStore
from services.arbitrator.keys import ArbitratorKeys
from shared.api.messages import PodInfo, WorkloadInfo, WorkloadRef
from shared.api.meta import ObjectMeta, ObjectReference
from shared.api.pmj import PodMigrationJob, PodMigrationJobSpec
from shared.config.loader import config_from_dict
from shared.config.model import PodherdConfig, nats_servers
from shared.core.waits import wait_event
from shared.ledger.slots import Slot
from shared.ledger.store import Ledger
from shared.nats import bus
from shared.nats.access import Access
from shared.nats.publisher import Publisher
from shared.redis import client as redis_client
from shared.rules.facts import facts_of, queued_record


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * q))] * 1000, 2)


class TimedPublisher:
    """The real pipelined publisher, noting when each admitted decision was acknowledged."""

    def __init__(self, inner: Publisher) -> None:
        self.inner = inner
        self.in_flight: list[str] = []
        self.acked: dict[str, float] = {}

    async def publish(self, subject: str, data: bytes, msg_id: str) -> None:
        await self.inner.publish(subject, data, msg_id)
        if ".jobs.admitted." in subject:
            self.in_flight.append(msg_id.split("/", maxsplit=1)[0])

    async def flush(self) -> int:
        count = await self.inner.flush()
        now = time.perf_counter()
        for uid in self.in_flight:
            self.acked.setdefault(uid, now)
        self.in_flight.clear()
        return count


WORKLOAD = "workload:Deployment/default/big"  # the one workload every job's pod belongs to


class Bench:
    def __init__(self, config: PodherdConfig, client: aioredis.Redis, nc: Any) -> None:
        self.config = config
        self.client = client
        self.facts = FactStore(client, config.redis.key_prefix)
        self.ledger = Ledger(client, config.redis.key_prefix, 600)
        self.publisher = TimedPublisher(Publisher(nc))
        subjects = bus.Subjects(config.nats.subject_prefix)
        self.engine = Engine(
            config,
            self.facts,
            self.ledger,
            publisher=self.publisher,
            subject=subjects.job,
            audit_subject=subjects.audit,
        )
        self.next = 0

    def job(self, i: int) -> PodMigrationJob:
        return PodMigrationJob(
            metadata=ObjectMeta(name=f"j{i}", uid=f"u{i}", creation_timestamp=datetime.now(UTC)),
            spec=PodMigrationJobSpec(pod_ref=ObjectReference(namespace="default", name=f"p{i}")),
        )

    def pod(self, i: int, node: str) -> PodInfo:
        return PodInfo(
            uid=f"p-{i}",
            namespace="default",
            name=f"p{i}",
            node_name=node,
            phase="Running",
            ready=True,
            owner=ObjectReference(kind="ReplicaSet", name="big-rs", uid="rs"),
            workload=WorkloadRef(kind="Deployment", namespace="default", name="big"),
            scheduler_name="koord-scheduler",
        )

    async def add_pods(self, nodes: list[str]) -> list[int]:
        """Pods (facts) for new jobs, in one round trip per 5,000."""
        first, self.next = self.next, self.next + len(nodes)
        for start in range(0, len(nodes), 5000):
            pipe = self.client.pipeline(transaction=False)
            for k, node in enumerate(nodes[start : start + 5000], start=first + start):
                pipe.set(self.facts.key("pod", f"default/p{k}"), self.facts.encoded("1", self.pod(k, node)))
                pipe.sadd(
                    self.ledger.keys.member("ready", WORKLOAD), f"p-{k}"
                )  # Ready, as the pod events would say
            await pipe.execute()
        return list(range(first, self.next))

    async def queue_directly(self, indices: list[int]) -> None:
        """Jobs in the queue as `on_job` leaves them, written in bulk (setup, not measured)."""
        keys = ArbitratorKeys(self.config.redis.key_prefix)
        for start in range(0, len(indices), 5000):
            chunk = indices[start : start + 5000]
            pipe = self.client.pipeline(transaction=False)
            now = repr(time.time())
            for i in chunk:
                pipe.hset(keys.jobs, f"u{i}", queued_record(facts_of(self.job(i), "ReservationFirst")))
                pipe.hset(keys.since, f"u{i}", now)
            await pipe.execute()
            await self.ledger.queue.enqueue_many((f"u{i}", f"{i:09d}") for i in chunk)

    async def drain(self) -> int:
        admitted = 0
        while True:
            admitted += await self.engine.admit_pass()
            if not await self.ledger.queue.head(1):
                return admitted


def new_prefix(pending: int) -> str:
    return f"bench{pending}x{random.randrange(10**6)}"


async def run_depth(
    redis: dict[str, Any],
    nats_url: str | dict[str, Any],
    pending: int,
    burst: int,
    rate: float,
    offered: int,
    depth: int = 256,
    *,
    prefix: str | None = None,
    server_redis: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """`nats_url`: a URL, or the `nats` section (TLS files, ...); `server_redis`: a connection allowed what
    the arbitrator's user is not (INFO), for the server's memory and CPU (default: the arbitrator's own)."""
    prefix = prefix or new_prefix(pending)
    nats_section = {"url": nats_url} if isinstance(nats_url, str) else nats_url
    config = config_from_dict(
        {
            "redis": {**redis, "keyPrefix": prefix},
            "nats": {**nats_section, "subjectPrefix": prefix},
            "arbitrator": {"scanDepth": depth},
            "migrationController": {
                "evictQPS": 10**6,
                "evictBurst": 10**6,
                "maxMigratingPerNode": 1,
                # The workload limits open: every replica may go (skipCheckExpectedReplicas lets a limit
                # that equals the replica count through).
                "maxMigratingPerWorkload": "100%",
                "maxUnavailablePerWorkload": "100%",
                "skipCheckExpectedReplicas": True,
                "objectLimiters": {"workload": {"duration": "1s", "maxMigrating": 10**7, "burst": 10**7}},
            },
        }
    )
    client = redis_client.connect(config.redis)  # as the service connects: no timer per command
    server = redis_client.connect(config_from_dict({"redis": server_redis}).redis) if server_redis else client
    nc = await nats.connect(servers=nats_servers(config.nats.url), **Access(config.nats).options)
    js = nc.jetstream()
    subjects = bus.Subjects(prefix)
    await bus.ensure_work_streams(js, subjects, config.nats)
    bench = Bench(config, client, nc)
    await bench.ledger.completeness.rebuild([])
    replicas = pending + burst + offered  # every pod the run adds, all Ready
    workload = WorkloadInfo(
        uid="w",
        kind="Deployment",
        namespace="default",
        name="big",
        replicas=replicas,
        available_replicas=replicas,
    )
    await bench.facts.put("workload", "Deployment/default/big", "1", fact=workload)
    await bench.ledger.admit(
        "blocker", "blocker-pod", [Slot("maxMigratingPerNode", "node:full", 1, "full")], buckets=[]
    )

    # The backlog: P jobs on the full node, each looked at once and parked.
    backlog = await bench.add_pods(["full"] * pending)
    await bench.queue_directly(backlog)
    started = time.perf_counter()
    await bench.drain()
    park_seconds = time.perf_counter() - started
    redis_memory = (await server.info("memory"))["used_memory"]

    # Capacity: a burst of admissible jobs, each on its own node, admitted as fast as possible.
    ready = await bench.add_pods([f"node-b{k}" for k in range(burst)])
    await bench.queue_directly(ready)
    redis_cpu = await redis_cpu_seconds(server)
    cpu = time.process_time()
    started = time.perf_counter()
    admitted = await bench.drain()
    capacity_seconds = time.perf_counter() - started
    cpu = time.process_time() - cpu
    redis_cpu = await redis_cpu_seconds(server) - redis_cpu

    # Latency at an offered rate, through the intake (`on_job`) and an admission loop as in the service.
    arriving = await bench.add_pods([f"node-r{k}" for k in range(offered)])
    arrivals: dict[str, float] = {}
    wake = asyncio.Event()
    done = asyncio.Event()

    async def admission_loop() -> None:
        while not done.is_set():
            await wait_event(wake, 0.5)
            wake.clear()
            await bench.engine.admit_pass()

    inbox: list[PodMigrationJob] = []
    arrived = asyncio.Event()

    async def intake() -> None:
        # As the service's consumer: whatever has arrived since the last fetch, queued together.
        while not done.is_set() or inbox:
            await wait_event(arrived, 0.5)
            arrived.clear()
            batch = inbox[:]
            inbox.clear()
            if batch:
                await bench.engine.on_jobs([(job, False, None) for job in batch])
                wake.set()

    tasks = [asyncio.create_task(admission_loop()), asyncio.create_task(intake())]
    t0 = time.perf_counter()
    for n, i in enumerate(arriving):
        due = t0 + n / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        arrivals[f"u{i}"] = time.perf_counter()
        inbox.append(bench.job(i))
        arrived.set()
    offered_seconds = time.perf_counter() - t0
    deadline = time.perf_counter() + 30
    while not all(uid in bench.publisher.acked for uid in arrivals) and time.perf_counter() < deadline:
        wake.set()
        await asyncio.sleep(0.01)
    done.set()
    wake.set()
    arrived.set()
    await asyncio.gather(*tasks)
    latencies = [
        bench.publisher.acked[uid] - t for uid, t in arrivals.items() if uid in bench.publisher.acked
    ]

    keys = [k async for k in client.scan_iter(match=f"*{prefix}*", count=10_000)]
    for start in range(0, len(keys), 10_000):
        await client.delete(*keys[start : start + 10_000])
    for stream in ("JOBS", "INTENTS", "AUDIT", "DLQ"):
        with contextlib.suppress(Exception):
            await js.delete_stream(f"{subjects.stream_prefix}_{stream}")
    await nc.close()
    await client.aclose()
    if server is not client:
        await server.aclose()
    return {
        "pending": pending,
        "backlog_parked_per_s": round(pending / park_seconds),
        "burst": burst,
        "burst_admitted": admitted,
        "decisions_per_second": round(admitted / capacity_seconds),
        "per_decision_us": round(capacity_seconds / max(1, admitted) * 1e6, 1),
        "arbitrator_cpu_us_per_decision": round(cpu / max(1, admitted) * 1e6, 1),
        "redis_cpu_us_per_decision": round(redis_cpu / max(1, admitted) * 1e6, 1),
        "offered_per_s": rate,
        "offered_achieved_per_s": round(offered / offered_seconds),
        "offered_admitted": len(latencies),
        "latency_ms_p50": pct(latencies, 0.5) if latencies else None,
        "latency_ms_p99": pct(latencies, 0.99) if latencies else None,
        "latency_ms_max": round(max(latencies) * 1000, 2) if latencies else None,
        "redis_used_memory_mb_with_backlog": round(redis_memory / 2**20, 1),
    }


async def redis_cpu_seconds(client: aioredis.Redis) -> float:
    info = await client.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])
