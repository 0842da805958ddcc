"""The services' Redis connection, to a real server: commands carry no timer of their own (no task per
command), and the socket is set to find a dead peer by itself (keepalive probes, a bound on unacknowledged
writes)."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import hiredis
import pytest

from podherd.harness.servers import Server
from shared.config.model import RedisConfig
from shared.redis import client as redis_client
from tests.conftest import RedisScope

pytestmark = [pytest.mark.integration]


async def test_the_connection_finds_a_dead_peer_without_a_timer_per_command(redis_srv: Server) -> None:
    client = redis_client.connect(RedisConfig(url=redis_srv.url))
    try:
        assert await client.ping()
        connection = await client.connection_pool.get_connection()  # type: ignore[no-untyped-call]
        try:
            assert connection.socket_timeout is None
            assert connection.driver_info is None  # no CLIENT SETINFO: Redis before 7.2 does not know it
            sock = connection._writer.get_extra_info("socket")
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
            if hasattr(socket, "TCP_USER_TIMEOUT"):
                user_timeout = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT)
                assert user_timeout == redis_client.DEAD_PEER_S * 1000
                idle = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE)
                interval = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL)
                probes = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT)
                assert idle + interval * probes <= redis_client.DEAD_PEER_S
        finally:
            await client.connection_pool.release(connection)
        info = await client.client_info()  # the server was told nothing of the library: not a command sent
        assert (info["lib-name"], info["lib-ver"]) == ("", "")
    finally:
        await client.aclose()


async def test_calls_beyond_a_hundred_at_once_are_served_not_refused(
    redis_srv: Server, redis_scope: RedisScope
) -> None:
    client = redis_client.connect(RedisConfig(url=redis_srv.url))
    try:
        at_once = 300  # each holds its connection until the list has an item
        queue = redis_scope.key("queue")

        async def pop() -> int:
            _, value = await client.blpop([queue], timeout=30)  # type: ignore[misc]
            return int(value)

        # redis-py's own pool of 100 would refuse the 101st
        popping = asyncio.gather(*(pop() for _ in range(at_once)))
        await redis_scope.client.rpush(queue, *range(at_once))
        assert sorted(await popping) == list(range(at_once))
    finally:
        await client.aclose()


async def test_commands_are_packed_by_hiredis_and_read_back_as_written(
    redis_srv: Server, redis_scope: RedisScope
) -> None:
    client = redis_client.connect(RedisConfig(url=redis_srv.url))
    key = redis_scope.key("packed")
    try:
        connection = await client.connection_pool.get_connection()  # type: ignore[no-untyped-call]
        try:  # the C packer's bytes, in one piece, for a command whose name has two words too
            pack: Any = hiredis.pack_command  # its stub types a command as a one-element tuple
            assert connection.pack_command("SET", key, 1.5) == [pack(("SET", key, 1.5))]
            assert connection.pack_command("CONFIG GET", "maxmemory") == [
                pack((b"CONFIG", b"GET", "maxmemory"))
            ]
        finally:
            await client.connection_pool.release(connection)
        values: dict[str, str | bytes | int | float | memoryview] = {
            "text": "é ü",
            "bytes": b"\x00\xff",
            "int": 7,
            "float": 0.25,
            "view": memoryview(b"mv"),
        }
        pipe = client.pipeline(transaction=False)
        for field, value in values.items():
            pipe.hset(key, field, value)  # a memoryview, which hiredis does not pack, as redis-py packs it
        await pipe.execute()
        stored = await client.hgetall(key)
        assert stored == {
            b"text": "é ü".encode(),
            b"bytes": b"\x00\xff",
            b"int": b"7",
            b"float": b"0.25",
            b"view": b"mv",
        }
        assert await client.config_get("maxmemory")  # a two-word command, answered
    finally:
        await client.aclose()
