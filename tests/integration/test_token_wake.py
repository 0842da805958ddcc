"""A job parked on a token bucket (`evictQPS`) is woken when its token is due, whether or not anything else
happens in the cluster: jobs arrive at random moments at random rates, then the cluster is quiet, and every
job is admitted by the time its token came (plus one arbitration interval), never sooner than the bucket
allows. In one process (the arbitrator on the loop it shares with the other services, as `podherd run all`
runs it) and as separate processes (`podherd run arbitrator`, two replicas)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from podherd.harness.servers import Server
from tests.integration.test_arbitrator import (
    admitted,
    arbitrator_config,
    arbitrator_env,
    arbitrator_processes,
    arbitrators,
    decisions,
    setup_cluster,
)

INTERVAL = 0.5  # arbitrationArgs.interval: the latest a parked job is looked at again, at the default
SLACK = 1.0  # the machine's: messages, passes and Redis round trips
OPEN: dict[str, Any] = {
    "maxMigratingPerNode": 0,
    "maxMigratingPerWorkload": "100%",
    "maxUnavailablePerWorkload": "100%",
    "skipCheckExpectedReplicas": True,
    "objectLimiters": {"workload": {"duration": "0s"}},
}


async def scenario(
    nats_srv: Server, redis_srv: Server, prefix: str, *, jobs: int, qps: float, burst: int
) -> tuple[Any, Any, Any, Any]:
    config = arbitrator_config(nats_srv, redis_srv, prefix, evictQPS=qps, evictBurst=burst, **OPEN)
    nc, subjects, cluster = await setup_cluster(config)
    await cluster.deployment("web", jobs)
    for i in range(jobs):
        await cluster.pod(f"web-{i}", f"node-{i}", "web")
    return config, nc, subjects, cluster


def check_paced(ds: list[dict[str, Any]], *, qps: float, burst: int) -> None:
    """Never sooner than the bucket allows: the k-th admission at least (k - burst) / qps after the first."""
    times = sorted(
        datetime.fromisoformat(d["decidedAt"]).timestamp() for d in ds if d["decision"] == "admitted"
    )
    for k, at in enumerate(times, start=1):
        assert at - times[0] >= (k - burst) / qps - 0.05, (k, at - times[0], qps, burst)


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    jobs=st.integers(min_value=4, max_value=6),
    qps=st.sampled_from([10.0, 25.0, 50.0]),
    burst=st.integers(min_value=1, max_value=2),
    gaps=st.lists(st.floats(min_value=0.0, max_value=0.2), min_size=6, max_size=6),
)
async def test_in_one_process_a_parked_job_wakes_when_its_token_is_due(
    nats_srv: Server, redis_srv: Server, test_id: str, jobs: int, qps: float, burst: int, gaps: list[float]
) -> None:
    prefix = f"{test_id}w{uuid.uuid4().hex[:8]}"
    config, nc, subjects, cluster = await scenario(
        nats_srv, redis_srv, prefix, jobs=jobs, qps=qps, burst=burst
    )
    loop = asyncio.get_running_loop()
    try:
        async with arbitrators([config]):
            for i in range(jobs):
                await cluster.job(f"j{i}", f"web-{i}", created=i)
                await asyncio.sleep(gaps[i])  # the arrivals' schedule, not a wait for anything
            quiet = loop.time()  # from here on nothing happens in the cluster
            due = max(0.0, (jobs - burst) / qps)
            ds = await decisions(
                nc, subjects, lambda ds: len(admitted(ds)) == jobs, within=due + INTERVAL + SLACK
            )
            assert loop.time() - quiet <= due + INTERVAL + SLACK
    finally:
        await nc.close()
    check_paced(ds, qps=qps, burst=burst)


async def test_as_separate_processes_parked_jobs_wake_when_their_tokens_are_due(
    nats_srv: Server, redis_srv: Server, test_id: str, tmp_path: Path
) -> None:
    jobs, qps, burst = 6, 5.0, 1
    _, nc, subjects, cluster = await scenario(nats_srv, redis_srv, test_id, jobs=jobs, qps=qps, burst=burst)
    env = arbitrator_env(
        nats_srv,
        redis_srv,
        test_id,
        tmp_path,
        EVICTQPS=str(qps),
        EVICTBURST=str(burst),
        MAXMIGRATINGPERNODE="0",
        MAXMIGRATINGPERWORKLOAD="100%",
        MAXUNAVAILABLEPERWORKLOAD="100%",
        SKIPCHECKEXPECTEDREPLICAS="true",
        OBJECTLIMITERS="{workload: {duration: 0s}}",
    )
    procs = arbitrator_processes(env, tmp_path, 2)
    loop = asyncio.get_running_loop()
    try:
        for i in range(jobs):
            await cluster.job(f"j{i}", f"web-{i}", created=i)
        quiet = loop.time()
        due = (jobs - burst) / qps
        # The processes' start (their streams and ledger) comes first: measured from their first admission.
        first = await decisions(nc, subjects, lambda ds: len(admitted(ds)) >= 1, within=60)
        started = loop.time()
        ds = await decisions(
            nc, subjects, lambda ds: len(admitted(ds)) == jobs, within=due + INTERVAL + SLACK
        )
        assert loop.time() - started <= due + INTERVAL + SLACK, (started - quiet, loop.time() - started)
        assert first
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(30)
        await nc.close()
    check_paced(ds, qps=qps, burst=burst)
