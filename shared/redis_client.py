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
from typing import Any

import redis.asyncio as aioredis
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


def connect(config: RedisConfig) -> aioredis.Redis:
    options: dict[str, Any] = {
        "max_connections": CONNECTIONS,
        "socket_timeout": None,
        "socket_connect_timeout": CONNECT_TIMEOUT_S,
        "driver_info": DRIVER,
    }
    if not config.url.startswith("unix://"):  # a local socket's peer cannot vanish without closing it
        options.update(socket_keepalive=True, socket_keepalive_options=keepalive_options())
    return aioredis.from_url(config.url, **options)
