"""The services' Redis connection: no timer per command; the kernel finds a dead peer.

redis-py bounds every command with `socket_timeout` by wrapping its write in `asyncio.wait_for` (on
Python 3.11 a task per command) and its read in `asyncio.timeout`: a tenth of a busy tracker's or
arbitrator's CPU. Instead the socket itself gives up: TCP keepalive probes an idle connection, and
`TCP_USER_TIMEOUT` fails one whose written data goes unacknowledged, both within `DEAD_PEER_S`; a
Redis that answers nothing while its kernel still acknowledges (a stopped process) is bounded by the
deadlines of the work that must not outlive one (a reconcile within its lock, an admission pass, a
readiness check); elsewhere it is waited for as a slow one would be.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable
from typing import Any

import hiredis
import redis.asyncio as aioredis
from redis.asyncio.connection import AbstractConnection
from redis.driver_info import DriverInfo

from shared.config import RedisConfig

DEAD_PEER_S = 15
CONNECT_TIMEOUT_S = 5.0
# The services bound their own concurrency (reconciles, commands, notes at once: a few hundred Redis calls
# in flight at most); redis-py's default pool of 100 would fail the calls beyond it instead of queueing them.
CONNECTIONS = 1024
# What each connection tells the server (CLIENT SETINFO), made once: redis-py would read its version from
# the package metadata for every new connection (1.3 ms each, while a burst grows the pool).
DRIVER = DriverInfo()


def keepalive_options() -> dict[int, int]:
    options = {}
    for name, value in (
        ("TCP_KEEPIDLE", 5),
        ("TCP_KEEPINTVL", 2),
        ("TCP_KEEPCNT", 5),
        ("TCP_USER_TIMEOUT", DEAD_PEER_S * 1000),
    ):
        if hasattr(socket, name):  # Linux has them all; elsewhere the system's defaults stand
            options[getattr(socket, name)] = value
    return options


class _HiredisPacking(AbstractConnection):
    """Commands packed by hiredis (C) rather than by redis-py's Python packer (which the synchronous client
    already leaves to hiredis): a pipeline of a few hundred commands costs a tenth of the CPU."""

    def pack_command(self, *args: Any) -> list[bytes]:
        first = args[0]
        if isinstance(first, str):  # "CONFIG GET": the words go as separate arguments
            args = (*first.encode().split(), *args[1:])
        elif b" " in first:
            args = (*first.split(), *args[1:])
        try:
            return [hiredis.pack_command(args)]
        except TypeError:  # what hiredis does not pack (a memoryview): as redis-py packs it
            return super().pack_command(*args)

    def pack_commands(self, commands: Iterable[Iterable[Any]]) -> list[bytes]:
        return [b"".join(chunk for command in commands for chunk in self.pack_command(*command))]


_PACKING: dict[type[AbstractConnection], type[AbstractConnection]] = {}


def _packing(connection_class: type[AbstractConnection]) -> type[AbstractConnection]:
    """`connection_class` (a TCP, TLS or Unix socket connection) with its commands packed by hiredis."""
    if connection_class not in _PACKING:
        name = f"Packed{connection_class.__name__}"
        _PACKING[connection_class] = type(name, (_HiredisPacking, connection_class), {})
    return _PACKING[connection_class]


def connect(config: RedisConfig) -> aioredis.Redis:
    options: dict[str, Any] = {
        "max_connections": CONNECTIONS,
        "socket_timeout": None,
        "socket_connect_timeout": CONNECT_TIMEOUT_S,
        "driver_info": DRIVER,
    }
    if not config.url.startswith("unix://"):  # a local socket's peer cannot vanish without closing it
        options.update(socket_keepalive=True, socket_keepalive_options=keepalive_options())
    client = aioredis.from_url(config.url, **options)
    pool = client.connection_pool
    pool.connection_class = _packing(pool.connection_class)
    return client
