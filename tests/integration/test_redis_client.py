"""The services' Redis connection, to a real server: commands carry no timer of their own (no task per
command), and the socket is set to find a dead peer by itself (keepalive probes, a bound on unacknowledged
writes)."""

from __future__ import annotations

import asyncio
import socket
from importlib import metadata

import pytest

from podherd.servers import Server
from shared import redis_client
from shared.config import RedisConfig
from tests.conftest import RedisScope

pytestmark = [pytest.mark.integration]


async def test_the_connection_finds_a_dead_peer_without_a_timer_per_command(redis_srv: Server) -> None:
    client = redis_client.connect(RedisConfig(url=redis_srv.url))
    try:
        assert await client.ping()
        connection = await client.connection_pool.get_connection()  # type: ignore[no-untyped-call]
        try:
            assert connection.socket_timeout is None
            assert connection.driver_info is redis_client.DRIVER  # made once, not for every connection
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
        info = await client.client_info()  # what the server was told of the client, as redis-py tells it
        assert (info["lib-name"], info["lib-ver"]) == ("redis-py", metadata.version("redis"))
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
