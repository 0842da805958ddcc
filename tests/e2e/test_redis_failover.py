"""A storm of jobs through two replicas of each service on Redis behind Sentinels, its primary killed in the
middle: the Sentinels promote the replica, the services follow, writes wait until the old primary is back
as a replica; every job ends with exactly one replacement of its own and no limit is ever exceeded."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import msgspec
import pytest

from kubesim.sim import SimHandle
from podherd.redis_topology import RedisSentinelTopology
from podherd.servers import Server
from shared.config_loader import config_from_dict
from tests.e2e.storms import assert_each_job_moved_once, storm, storm_cluster, storm_config

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.slow]


async def test_a_storm_through_a_redis_failover_loses_and_doubles_nothing(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, topology: RedisSentinelTopology, test_id: str
) -> None:
    kube = storm_cluster(kubesim_factory)
    base = storm_config(kube, nats_srv, Server("redis", "redis://", "sentinel"), test_id)
    config = msgspec.structs.replace(
        base, redis=config_from_dict({"redis": {**topology.config(), "keyPrefix": test_id}}).redis
    )

    async def failover() -> None:  # some jobs done, most in flight: the primary goes
        old = topology.primary()
        old.kill()
        await asyncio.to_thread(topology.until_primary_is_not, old)
        await asyncio.to_thread(topology.rejoin, old)

    ran = await storm(kube, config, failover)
    assert_each_job_moved_once(kube, ran)
    assert ran.findings.samples > 0
    assert ran.held == {"slots": {}, "claims": {}}
