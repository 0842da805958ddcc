"""What waiting jobs cost: jobs deferred by an object limiter, with the arbitrator idling over them.

    python -m bench.waiting_bench [--workloads 1000] [--waiting 10] [--seconds 10]

Real Redis and NATS and the real engine, as in bench.arbitrator_bench. `--workloads` Deployments, each with
`--waiting` + 1 jobs; the workload object limiter allows one migration per workload per 10 minutes, so the
first job of each is admitted and the others wait for a token that will not come within the run. Then the
admission loop runs as in the service (a pass at every ledger timer and at the arbitration interval, which
also sweeps the parked jobs) for `--seconds`, and the run reports per second: the arbitrator's CPU, Redis'
CPU, the jobs looked at again (candidates handed to the ledger) and the audit records published.
Results: JSON on stdout and in bench/results/waiting.json.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import nats
import redis.asyncio as aioredis

from bench.results_io import emit
from podherd.harness.servers import nats_server, redis_server
from services.arbitrator.engine import Engine
from services.arbitrator.fact_store import FactStore
from services.arbitrator.keys import ArbitratorKeys
from shared.api.messages import PodInfo, WorkloadInfo, WorkloadRef
from shared.api.meta import ObjectMeta, ObjectReference
from shared.api.pmj import PodMigrationJob, PodMigrationJobSpec
from shared.config.loader import config_from_dict
from shared.config.model import PodherdConfig
from shared.core.waits import wait_event
from shared.ledger.store import Candidate, Ledger, Verdict
from shared.nats import bus
from shared.nats.publisher import Publisher
from shared.rules.facts import facts_of, queued_record


class CountingPublisher:
    """The real pipelined publisher, counting the audit records it publishes."""

    def __init__(self, inner: Publisher) -> None:
        self.inner = inner
        self.audit_records = 0

    async def publish(self, subject: str, data: bytes, msg_id: str) -> None:
        if ".audit." in subject:
            self.audit_records += 1
        await self.inner.publish(subject, data, msg_id)

    async def flush(self) -> int:
        return await self.inner.flush()


class CountingLedger(Ledger):
    """The ledger, counting the jobs handed to it for a decision (each one a job looked at again)."""

    looked_at = 0

    async def admit_batch(
        self, candidates: Sequence[Candidate], from_queue: bool, now: float | None = None
    ) -> list[Verdict] | None:
        CountingLedger.looked_at += len(candidates)
        return await super().admit_batch(candidates, from_queue, now)


def configured(redis_url: str, nats_url: str, prefix: str) -> PodherdConfig:
    return config_from_dict(
        {
            "redis": {"url": redis_url, "keyPrefix": prefix},
            "nats": {"url": nats_url, "subjectPrefix": prefix},
            "migrationController": {
                "evictQPS": 10**6,
                "evictBurst": 10**6,
                "maxMigratingPerNode": 10**6,
                "maxMigratingPerWorkload": "100%",
                "maxUnavailablePerWorkload": "100%",
                "skipCheckExpectedReplicas": True,
                "objectLimiters": {"workload": {"duration": "10m", "maxMigrating": 1}},
            },
        }
    )


async def seed(
    config: PodherdConfig, client: aioredis.Redis, ledger: Ledger, *, workloads: int, each: int
) -> int:
    """Facts for `workloads` Deployments of `each` Ready pods, and a queued job for every pod."""
    facts = FactStore(client, config.redis.key_prefix)
    keys = ArbitratorKeys(config.redis.key_prefix)
    now = repr(time.time())
    jobs = 0
    for w in range(workloads):
        name = f"app-{w}"
        info = WorkloadInfo(
            uid=f"w{w}",
            kind="Deployment",
            namespace="default",
            name=name,
            replicas=each,
            available_replicas=each,
        )
        await facts.put("workload", f"Deployment/default/{name}", "1", fact=info)
        pipe = client.pipeline(transaction=False)
        for k in range(each):
            i = w * each + k
            pod = PodInfo(
                uid=f"p-{i}",
                namespace="default",
                name=f"p{i}",
                node_name=f"node-{i}",
                phase="Running",
                ready=True,
                owner=ObjectReference(kind="ReplicaSet", name=f"{name}-rs", uid=f"rs{w}"),
                workload=WorkloadRef(kind="Deployment", namespace="default", name=name),
                scheduler_name="koord-scheduler",
            )
            pipe.set(facts.key("pod", f"default/p{i}"), facts.encoded("1", pod))
            pipe.sadd(ledger.keys.member("ready", f"workload:Deployment/default/{name}"), f"p-{i}")
            job = PodMigrationJob(
                metadata=ObjectMeta(name=f"j{i}", uid=f"u{i}", creation_timestamp=datetime.now(UTC)),
                spec=PodMigrationJobSpec(pod_ref=ObjectReference(namespace="default", name=f"p{i}")),
            )
            pipe.hset(keys.jobs, f"u{i}", queued_record(facts_of(job, "ReservationFirst")))
            pipe.hset(keys.since, f"u{i}", now)
            jobs += 1
        await pipe.execute()
        await ledger.queue.enqueue_many((f"u{w * each + k}", f"{k:04d}{w:06d}") for k in range(each))
    return jobs


async def run(workloads: int, waiting: int, seconds: float) -> dict[str, Any]:
    redis, broker = redis_server(), nats_server()
    prefix = f"wait{random.randrange(10**6)}"
    try:
        config = configured(redis.url, broker.url, prefix)
        client = aioredis.from_url(redis.url)
        nc = await nats.connect(broker.url)
        subjects = bus.Subjects(prefix)
        await bus.ensure_work_streams(nc.jetstream(), subjects, config.nats)
        ledger = CountingLedger(client, prefix, 600)
        await ledger.completeness.rebuild([])
        publisher = CountingPublisher(Publisher(nc))
        engine = Engine(
            config,
            FactStore(client, prefix),
            ledger,
            publisher=publisher,
            subject=subjects.job,
            audit_subject=subjects.audit,
        )
        jobs = await seed(config, client, ledger, workloads=workloads, each=waiting + 1)
        while await ledger.queue.head(
            1
        ):  # every job looked at once: one admitted per workload, the rest wait
            await engine.admit_pass()
        looked_before, audit_before = CountingLedger.looked_at, publisher.audit_records
        CountingLedger.looked_at, publisher.audit_records = 0, 0

        interval = config.migration_controller.arbitration_interval_seconds
        redis_cpu = await _redis_cpu(client)
        cpu, started = time.process_time(), time.monotonic()
        swept = started
        stop = asyncio.Event()
        while time.monotonic() - started < seconds:  # the service's admission loop, idle but for timers
            timeout = interval if engine.next_timer is None else max(0.001, min(interval, engine.next_timer))
            await wait_event(stop, min(timeout, seconds - (time.monotonic() - started)))
            if time.monotonic() - swept >= interval:
                swept = time.monotonic()
                await engine.sweep()
            await engine.admit_pass()
        elapsed = time.monotonic() - started
        arbitrator_cpu = time.process_time() - cpu
        redis_cpu = await _redis_cpu(client) - redis_cpu
        waiting_now = await ledger.queue.length()
        await nc.close()
        await client.aclose()
        return {
            "jobs": jobs,
            "workloads": workloads,
            "waiting": waiting_now,
            "first_pass_looked_at": looked_before,
            "first_pass_audit_records": audit_before,
            "window_seconds": round(elapsed, 1),
            "arbitrator_cpu_per_second": round(arbitrator_cpu / elapsed, 4),
            "redis_cpu_per_second": round(redis_cpu / elapsed, 4),
            "looked_at_again_per_second": round(CountingLedger.looked_at / elapsed, 1),
            "audit_records_per_second": round(publisher.audit_records / elapsed, 1),
        }
    finally:
        redis.stop()
        broker.stop()


async def _redis_cpu(client: aioredis.Redis) -> float:
    info = await client.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workloads", type=int, default=1000)
    parser.add_argument("--waiting", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    emit("waiting", asyncio.run(run(args.workloads, args.waiting, args.seconds)))


if __name__ == "__main__":
    main()
