"""The arbitrator's admission cost, and a model of Koordinator's arbitration, side by side.

    python -m bench.arbitrator_bench [--pending 1000 10000 100000] [--burst 1000]

Real Redis and the real engine (facts, queue, ledger script); NATS publishing is replaced by an in-memory
sink so the numbers are the arbitration's own. For each pending depth P:
- P jobs wait in the queue, all blocked by a full node (deferred, as in a busy cluster);
- `burst` new admissible jobs arrive on other nodes; each pass admits what fits: decisions per second and
  the per-job latency from arrival to admission (p50/p99);
- the Koordinator model: every 500 ms one pass sorts and filters all P+burst pending jobs in memory; its
  latency is the wait for the next tick plus that pass.
Results: JSON on stdout and in bench/results/arbitrator.json.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from datetime import UTC, datetime
from typing import Any

import redis.asyncio as aioredis

from bench.results_io import emit
from services.arbitrator.engine import Engine
from services.arbitrator.facts import FactStore
from services.arbitrator.rules import filters, order
from services.arbitrator.rules.facts import JobFacts
from shared.api.messages import PodInfo, WorkloadInfo, WorkloadRef
from shared.api.meta import ObjectMeta, ObjectReference
from shared.api.pmj import PodMigrationJob, PodMigrationJobSpec
from shared.config import config_from_dict
from shared.ledger import Ledger
from shared.servers import redis_server
from shared.slots import Slot


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * q))] * 1000, 2)


async def run_depth(url: str, pending: int, burst: int) -> dict[str, Any]:
    prefix = f"bench{pending}{random.randrange(10**6)}"
    config = config_from_dict(
        {
            "redis": {"url": url, "keyPrefix": prefix},
            "migrationController": {
                "evictQPS": 10**6,
                "evictBurst": 10**6,
                "maxMigratingPerNode": 1,
                "maxMigratingPerWorkload": 10**5,
                "maxUnavailablePerWorkload": 10**5,
                "objectLimiters": {"workload": {"duration": "1s", "maxMigrating": 10**6}},
            },
            "arbitrator": {"scanDepth": 256},
        }
    )
    client = aioredis.from_url(url)
    facts = FactStore(client, prefix)
    ledger = Ledger(client, prefix, 600)
    await ledger.rebuild([])
    sent: list[tuple[str, float]] = []

    async def sink(subject: str, data: bytes, msg_id: str) -> None:
        if ".jobs.admitted." in subject:
            sent.append((msg_id.split("/", maxsplit=1)[0], time.perf_counter()))

    engine = Engine(
        config, facts, ledger, sink, lambda step, job: f"p.jobs.{step}.{job}", lambda job: f"p.a.{job}"
    )
    workload = WorkloadInfo(
        uid="w", kind="Deployment", namespace="default", name="big", replicas=10**6, available_replicas=10**6
    )
    await facts.put("workload", "Deployment/default/big", "1", workload)

    def job(i: int) -> PodMigrationJob:
        return PodMigrationJob(
            metadata=ObjectMeta(name=f"j{i}", uid=f"u{i}", creation_timestamp=datetime.now(UTC)),
            spec=PodMigrationJobSpec(pod_ref=ObjectReference(namespace="default", name=f"p{i}")),
        )

    async def pod(i: int, node: str) -> None:
        info = PodInfo(
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
        await facts.put("pod", f"default/p{i}", "1", info)

    # The backlog: P jobs on node-full, whose one slot a blocker holds.
    await ledger.admit(
        "blocker", "blocker-pod", [Slot("maxMigratingPerNode", "node:node-full", 1, "node-full")], []
    )
    for i in range(pending):
        await pod(i, "node-full")
        await engine.on_job(job(i), False, None)
    await engine.admit_pass()  # records their deferrals once
    # The burst: admissible jobs on their own nodes.
    arrivals: dict[str, float] = {}
    for k in range(burst):
        i = pending + k
        await pod(i, f"node-{k}")
    started = time.perf_counter()
    for k in range(burst):
        i = pending + k
        arrivals[f"u{i}"] = time.perf_counter()
        await engine.on_job(job(i), False, None)
        if k % 50 == 49:
            await engine.admit_pass()
    while len(sent) < burst:
        if await engine.admit_pass() == 0:
            break
    elapsed = time.perf_counter() - started
    latencies = [t - arrivals[uid] for uid, t in sent if uid in arrivals]
    keys = list(await client.keys(f"*{prefix}*"))
    if keys:
        await client.delete(*keys)
    await client.aclose()
    return {
        "pending": pending,
        "burst": burst,
        "admitted": len(sent),
        "decisions_per_second": round(len(sent) / elapsed),
        "latency_ms_p50": pct(latencies, 0.5) if latencies else None,
        "latency_ms_p99": pct(latencies, 0.99) if latencies else None,
    }


def koordinator_model(pending: int, burst: int, interval: float = 0.5) -> dict[str, Any]:
    """Every `interval`, sort and filter all pending jobs in memory (no I/O at all: a generous model)."""
    args = config_from_dict({}).migration_controller
    pods = [
        PodInfo(
            uid=f"p{i}",
            namespace="default",
            name=f"p{i}",
            node_name=f"n{i % 500}",
            scheduler_name="koord-scheduler",
            owner=ObjectReference(kind="ReplicaSet", name="rs"),
            priority=random.randrange(100),
        )
        for i in range(pending + burst)
    ]
    jobs = [
        JobFacts(name=f"j{i}", uid=f"u{i}", pod_namespace="default", pod_name=f"p{i}", created_at=float(i))
        for i in range(pending + burst)
    ]
    started = time.perf_counter()
    ranked = sorted(range(len(jobs)), key=lambda i: order.sort_key(jobs[i], pods[i], None, 0))
    for i in ranked:
        filters.evaluate(jobs[i], pods[i], None, args)
    pass_seconds = time.perf_counter() - started
    # A job arriving uniformly in time waits on average half an interval, at worst a whole one, plus a pass.
    return {
        "pending": pending,
        "pass_ms": round(pass_seconds * 1000, 1),
        "per_job_us": round(pass_seconds / len(jobs) * 1e6, 2),
        "latency_ms_p50": round((interval / 2 + pass_seconds) * 1000, 1),
        "latency_ms_p99": round((interval * 0.99 + pass_seconds) * 1000, 1),
        "decisions_per_second_ceiling": round(len(jobs) / (interval + pass_seconds)),
    }


async def main_async(depths: list[int], burst: int) -> dict[str, Any]:
    server = redis_server()
    try:
        podherd = [await run_depth(server.url, depth, burst) for depth in depths]
    finally:
        server.stop()
    model = [koordinator_model(depth, burst) for depth in depths]
    flat = None
    if len(podherd) > 1 and podherd[0]["decisions_per_second"]:
        flat = round(podherd[0]["decisions_per_second"] / max(1, podherd[-1]["decisions_per_second"]), 2)
    return {
        "podherd": podherd,
        "koordinator_model_500ms": model,
        "per_decision_cost_growth_first_to_last_depth": flat,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pending", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--burst", type=int, default=1000)
    args = parser.parse_args()
    emit("arbitrator", asyncio.run(main_async(args.pending, args.burst)))


if __name__ == "__main__":
    main()
