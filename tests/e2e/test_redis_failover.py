"""A storm of jobs through two replicas of each service on Redis behind Sentinels, its primary killed in the
middle: the Sentinels promote the replica, the services follow, writes wait until the old primary is back
as a replica; every job ends with exactly one replacement of its own and no limit is ever exceeded."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import msgspec
import pytest

from kubesim.sim import SimHandle
from podherd.invariants import Watchdog
from podherd.redis_topology import RedisSentinelTopology
from podherd.servers import Server
from shared import redis_client
from shared.config_loader import config_from_dict
from shared.kube import KubeClient
from shared.ledger import Ledger
from tests.e2e.pipeline import GROUP, PLURAL, VERSION, create_job, ended, pipeline, pipeline_config
from tests.e2e.test_lifecycle import cluster, start, until_no_reservations, web_pods
from tests.e2e.test_pipeline import until_all_ended
from tests.kube import watch_until

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.slow]
JOBS = 30


async def test_a_storm_through_a_redis_failover_loses_and_doubles_nothing(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, topology: RedisSentinelTopology, test_id: str
) -> None:
    kube = start(kubesim_factory, cluster(nodes=12, web=JOBS, node_cpu=16, cpu="100m"))
    pods = sorted(web_pods(kube))
    base = pipeline_config(
        kube.handle, nats_srv, Server("redis", "redis://", "sentinel"), test_id,
        maxMigratingPerWorkload=8, maxUnavailablePerWorkload=8,
    )  # fmt: skip
    config = msgspec.structs.replace(
        base, redis=config_from_dict({"redis": {**topology.config(), "keyPrefix": test_id}}).redis
    )
    redis = redis_client.connect(config.redis)
    watched = KubeClient.from_config(config.kubernetes)
    watchdog = Watchdog(watched, redis, test_id, args=config.migration_controller)
    stop = asyncio.Event()
    watching = asyncio.create_task(watchdog.run(stop))
    async with pipeline(config, replicas=2):
        for i, pod in enumerate(pods):
            create_job(kube, f"storm-{i:03d}", pod)
        # Some jobs done, most in flight: the primary goes.
        await asyncio.to_thread(
            watch_until,
            kube.custom.list_cluster_custom_object,
            lambda state: sum(ended(j) for j in state.values()) >= 3,
            60,
            group=GROUP,
            version=VERSION,
            plural=PLURAL,
        )
        old = topology.primary()
        old.kill()
        await asyncio.to_thread(topology.until_primary_is_not, old)
        await asyncio.to_thread(topology.rejoin, old)
        final = await until_all_ended(kube, JOBS)
        await asyncio.to_thread(until_no_reservations, kube)
    stop.set()
    findings = await watching
    held = await Ledger(redis, test_id, 600).snapshot()
    await redis.aclose()
    await watched.aclose()
    phases = [j["status"]["phase"] for j in final.values()]
    assert phases.count("Succeeded") == JOBS, {p: phases.count(p) for p in set(phases)}
    replacements = {j["status"]["podRef"]["name"] for j in final.values()}
    live = web_pods(kube)
    assert len(replacements) == JOBS and replacements == set(live) and not set(pods) & set(live)
    assert findings.limits_exceeded == 0, (findings.slot_breaches, findings.workload_breaches)
    assert findings.samples > 0
    assert held == {"slots": {}, "claims": {}}
