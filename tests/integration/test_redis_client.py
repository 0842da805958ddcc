"""The services' Redis connection, to a real server: commands carry no timer of their own (no task per
command), and the socket is set to find a dead peer by itself (keepalive probes, a bound on unacknowledged
writes)."""

from __future__ import annotations

import socket

import pytest

from podherd.servers import Server
from shared import redis_client
from shared.config import RedisConfig

pytestmark = [pytest.mark.integration]


async def test_the_connection_finds_a_dead_peer_without_a_timer_per_command(redis_srv: Server) -> None:
    client = redis_client.connect(RedisConfig(url=redis_srv.url))
    try:
        assert await client.ping()
        connection = await client.connection_pool.get_connection()  # type: ignore[no-untyped-call]
        try:
            assert connection.socket_timeout is None
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
    finally:
        await client.aclose()
