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
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

import hiredis
import redis.asyncio as aioredis
import redis.exceptions
from redis.asyncio.connection import AbstractConnection, Connection, SSLConnection, parse_url
from redis.asyncio.sentinel import Sentinel, SentinelManagedConnection, SentinelManagedSSLConnection
from redis.credentials import CredentialProvider
from redis.driver_info import DriverInfo

from shared.access.tls_files import TlsFiles
from shared.config.model import RedisConfig, Tls, host_port
from shared.core.backoff import describe
from shared.core.durations import parse_duration
from shared.core.redact import without_credentials
from shared.redis.durable import Durability

DEAD_PEER_S = 15
# What a Redis that does not answer raises (not a bug: waited out with a backoff, `shared.core.backoff`).
OUTAGE = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    redis.exceptions.BusyLoadingError,
    OSError,
    TimeoutError,
)
CONNECT_TIMEOUT_S = 5.0
# The services bound their own concurrency (reconciles, commands, notes at once: a few hundred Redis calls
# in flight at most); redis-py's default pool of 100 would fail the calls beyond it instead of queueing them.
CONNECTIONS = 1024
# No CLIENT SETINFO: Redis before 7.2 does not know it, and an ACL user cannot be granted a command its server
# does not know (`client_name` says who a connection is). Explicitly None: redis-py's default would send it.
DRIVER: DriverInfo | None = None


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


class FileCredentials(CredentialProvider):
    """An ACL user and the password in a file, read for each new connection (a Secret's rotation)."""

    def __init__(self, username: str | None, password_file: str | None) -> None:
        self.username, self.password_file = username, password_file

    def get_credentials(self) -> tuple[str] | tuple[str, str]:
        password = Path(self.password_file).read_text().strip() if self.password_file else ""
        return (self.username, password) if self.username else (password,)

    async def get_credentials_async(self) -> tuple[str] | tuple[str, str]:
        return self.get_credentials()


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


class _TlsFromFiles(SSLConnection):
    """TLS with the context of `redis.tls`'s files, loaded again when they change (a renewed certificate
    counts from the next connection); redis-py's own would keep a reconnecting connection's first one."""

    tls_files: TlsFiles

    def _connection_arguments(self) -> Any:
        arguments = dict(Connection._connection_arguments(self))
        self.tls_files.refresh()
        arguments["ssl"] = self.tls_files.context
        if self.tls_files.tls.server_name:
            arguments["server_hostname"] = self.tls_files.tls.server_name
        return arguments


def _tls(connection_class: type[AbstractConnection], files: TlsFiles) -> type[AbstractConnection]:
    """`connection_class` (to a primary the Sentinels name, or to one address) over TLS from `files`."""
    managed = issubclass(connection_class, SentinelManagedConnection)
    base = SentinelManagedSSLConnection if managed else SSLConnection
    return type(f"TlsFiles{base.__name__}", (_TlsFromFiles, base), {"tls_files": files})


_PACKING: dict[type[AbstractConnection], type[AbstractConnection]] = {}


def _packing(connection_class: type[AbstractConnection]) -> type[AbstractConnection]:
    """`connection_class` (a TCP, TLS or Unix socket connection) with its commands packed by hiredis."""
    if connection_class not in _PACKING:
        name = f"Packed{connection_class.__name__}"
        _PACKING[connection_class] = type(name, (_HiredisPacking, connection_class), {})
    return _PACKING[connection_class]


def connect(config: RedisConfig, name: str | None = None) -> aioredis.Redis:
    """A client of the configured Redis; `name` is what `CLIENT LIST` shows of each of its connections."""
    options: dict[str, Any] = {
        "max_connections": CONNECTIONS,
        "socket_timeout": None,
        "socket_connect_timeout": CONNECT_TIMEOUT_S,
        "driver_info": DRIVER,
    }
    if name:
        options["client_name"] = name
    if not config.url.startswith("unix://") or config.sentinel is not None:
        # a local socket's peer cannot vanish without closing it
        options.update(socket_keepalive=True, socket_keepalive_options=keepalive_options())
    if config.username or config.password_file:
        options["credential_provider"] = FileCredentials(config.username, config.password_file)
    if config.sentinel is not None:
        client = _through_sentinels(config, options)
    else:
        client = aioredis.from_url(config.url, **options)
    pool = client.connection_pool
    connection_class = pool.connection_class
    if config.tls is not None or config.url.startswith("rediss://"):
        connection_class = _tls(connection_class, TlsFiles(config.tls or Tls()))
    pool.connection_class = _packing(connection_class)
    return client


def _through_sentinels(config: RedisConfig, options: dict[str, Any]) -> aioredis.Redis:
    """A client of the primary the Sentinels name: a connection lost (or told READONLY by a demoted primary)
    asks them again, so the client follows a failover."""
    assert config.sentinel is not None
    url = parse_url(config.url) if config.url.startswith(("redis://", "rediss://")) else {}
    credentials = {k: url[k] for k in ("db", "username", "password") if url.get(k) is not None}
    sentinels = [found for address in config.sentinel.addresses if (found := host_port(address))]
    asking: dict[str, Any] = {
        "socket_connect_timeout": CONNECT_TIMEOUT_S,
        "socket_timeout": CONNECT_TIMEOUT_S,
    }
    if config.sentinel.use_password:
        if config.sentinel.password_file:
            asking["credential_provider"] = FileCredentials(None, config.sentinel.password_file)
        elif config.password_file:
            asking["credential_provider"] = FileCredentials(config.username, config.password_file)
        else:
            asking.update((k, v) for k, v in credentials.items() if k in ("username", "password"))
    tls = config.tls
    if tls is not None or config.url.startswith("rediss://"):
        tls = tls or Tls()
        asking.update(
            ssl=True, ssl_ca_certs=tls.ca, ssl_certfile=tls.cert, ssl_keyfile=tls.key, ssl_check_hostname=True
        )
    manager = Sentinel(sentinels, sentinel_kwargs=asking, **credentials)  # type: ignore[no-untyped-call]
    client: _Following = manager.master_for(config.sentinel.master_name, redis_class=_Following, **options)
    client.sentinels = list(manager.sentinels)
    return client


class _Following(aioredis.Redis):
    """The primary's client, closing with it the clients that ask the Sentinels where the primary is."""

    sentinels: list[aioredis.Redis]

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        await super().aclose(close_connection_pool)
        for sentinel in getattr(self, "sentinels", []):
            await sentinel.aclose()


def redis_check(client: aioredis.Redis) -> Callable[[], Awaitable[str | None]]:
    """A readiness check: a service that cannot work without Redis is not ready while it does not answer
    (within the ops endpoint's deadline for a check)."""

    async def check() -> str | None:
        try:
            await client.ping()
        except OUTAGE as exc:
            return f"Redis does not answer: {describe(exc)}"
        return None

    return check


def redis_address(config: RedisConfig) -> str:
    """Where Redis is, for a person reading a log line: the Sentinels when it is found through them."""
    if config.sentinel is not None:
        return f"{config.sentinel.master_name} via Sentinels {','.join(config.sentinel.addresses)}"
    return without_credentials(config.url)


def durability(client: aioredis.Redis, config: RedisConfig) -> Durability:
    """The barrier a service passes before acting on writes a safety property rests on
    (shared.redis.durable)."""
    return Durability(
        client,
        replicas=config.replicas_to_wait_for,
        timeout=parse_duration(config.wait_timeout),
        key=f"{config.key_prefix}:barrier",
    )
