"""The harness gives real servers: JetStream de-duplicates by Msg-Id, Redis runs Lua, restarts keep data."""

from __future__ import annotations

import asyncio

import nats
import pytest
import redis.asyncio as aioredis
from nats.js.api import StreamConfig

from podherd.harness.servers import (
    Server,
    find_nats_binary,
    find_redis_binary,
    nats_server,
    redis_server,
    start_nats_binary,
)
from shared.config.model import NatsConfig
from shared.nats.bus import StreamRefused, Subjects, ensure_events_stream
from tests.conftest import NatsScope, RedisScope

pytestmark = pytest.mark.integration


async def test_jetstream_deduplicates_by_msg_id(nats_scope: NatsScope) -> None:
    stream = nats_scope.stream("DEDUP")
    subject = nats_scope.subject("intents", "default")
    await nats_scope.js.add_stream(StreamConfig(name=stream, subjects=[nats_scope.subject(">")]))
    first = await nats_scope.js.publish(subject, b"a", headers={"Nats-Msg-Id": "job-1"})
    again = await nats_scope.js.publish(subject, b"a", headers={"Nats-Msg-Id": "job-1"})
    other = await nats_scope.js.publish(subject, b"b", headers={"Nats-Msg-Id": "job-2"})
    assert (bool(first.duplicate), bool(again.duplicate), bool(other.duplicate)) == (False, True, False)
    assert again.seq == first.seq
    info = await nats_scope.js.stream_info(stream)
    assert info.state.messages == 2


async def test_redis_runs_lua_atomically(redis_scope: RedisScope) -> None:
    take = redis_scope.client.register_script(
        """
        if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 1 then return 1 end
        if redis.call('SCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
        redis.call('SADD', KEYS[1], ARGV[1])
        return 1
        """
    )
    key = redis_scope.key("{node-1}", "migrating")
    results = await asyncio.gather(*(take(keys=[key], args=[f"job-{i % 5}", 2]) for i in range(40)))
    assert await redis_scope.client.scard(key) == 2
    assert sorted(set(results)) == [0, 1]
    time_reply = await redis_scope.client.eval("return redis.call('TIME')", 0)
    assert len(time_reply) == 2 and int(time_reply[0]) > 1_700_000_000


async def test_tests_are_isolated(nats_scope: NatsScope, redis_scope: RedisScope, test_id: str) -> None:
    assert nats_scope.prefix == redis_scope.prefix == test_id
    assert await redis_scope.client.keys(f"{test_id}*") == []


def test_address_from_environment_is_used_as_is(nats_srv: Server, redis_srv: Server) -> None:
    external = nats_server(env={"NATS_URL": nats_srv.url})
    assert external.url == nats_srv.url and external.origin == "env:NATS_URL" and not external.managed
    external.stop()  # never stops a server Podherd did not start
    external_redis = redis_server(env={"REDIS_URL": redis_srv.url})
    assert external_redis.origin == "env:REDIS_URL" and not external_redis.managed


def test_binaries_come_from_the_embedded_extra() -> None:
    assert find_nats_binary() is not None
    assert find_redis_binary() is not None


async def test_restarted_nats_keeps_jetstream_data(tmp_path_factory: pytest.TempPathFactory) -> None:
    binary = find_nats_binary()
    assert binary is not None
    server = start_nats_binary(binary, tmp_path_factory.mktemp("restart"))
    try:
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        await js.add_stream(StreamConfig(name="KEEP", subjects=["keep.>"]))
        await js.publish("keep.a", b"1", headers={"Nats-Msg-Id": "m1"})
        await nc.close()
        server.kill()
        server.restart()
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        assert (await js.stream_info("KEEP")).state.messages == 1
        dup = await js.publish("keep.a", b"1", headers={"Nats-Msg-Id": "m1"})
        assert dup.duplicate  # the de-duplication window survives a restart
        await nc.close()
    finally:
        server.stop()


async def test_redis_server_serves_clients(redis_srv: Server) -> None:
    client = aioredis.from_url(redis_srv.url)
    try:
        assert await client.ping() is True
    finally:
        await client.aclose()


async def test_a_given_store_limit_holds_whatever_the_disk(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Each stream's `max_bytes` is reserved against the JetStream store limit. Given a limit, a started
    server keeps it instead of deriving one from the free disk: 4 TiB of reservations fit here on any
    machine, and one byte more is refused."""
    binary = find_nats_binary()
    assert binary is not None
    gib = 1 << 30
    server = start_nats_binary(binary, tmp_path_factory.mktemp("limit"), max_file_store=4096 * gib)
    nc = await nats.connect(server.url)
    try:
        js = nc.jetstream()
        for name in ("A", "B"):
            await js.add_stream(StreamConfig(name=name, subjects=[f"{name}.>"], max_bytes=2048 * gib))
        with pytest.raises(nats.js.errors.ServerError) as refused:
            await js.add_stream(StreamConfig(name="C", subjects=["C.>"], max_bytes=1))
        assert refused.value.err_code == 10047  # insufficient storage resources available
    finally:
        await nc.close()
        server.stop()


async def test_a_stream_the_store_cannot_reserve_is_refused_naming_the_setting(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    binary = find_nats_binary()
    assert binary is not None
    server = start_nats_binary(binary, tmp_path_factory.mktemp("small"), max_file_store=512 << 20)
    nc = await nats.connect(server.url)
    try:
        js, subjects = nc.jetstream(), Subjects("small")
        with pytest.raises(StreamRefused) as refused:  # the default: 1 GiB
            await ensure_events_stream(js, subjects, NatsConfig())
        assert "SMALL_EVENTS" in str(refused.value) and "nats.streamMaxBytes" in str(refused.value)
        assert "insufficient storage resources available" in str(refused.value)
        await ensure_events_stream(js, subjects, NatsConfig(stream_max_bytes=256 << 20))
        assert (await js.stream_info("SMALL_EVENTS")).config.max_bytes == 256 << 20
    finally:
        await nc.close()
        server.stop()
