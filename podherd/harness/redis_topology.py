"""Redis as production runs it: a primary, a replica and three Sentinels, from the same valkey/redis binary
(the `embedded` extra's), on loopback ports; for the tests, the chaos run and local trials.

The data nodes refuse writes without a replica in reach (`min-replicas-to-write 1`,
`min-replicas-max-lag`): a primary cut off from its replica cannot take writes the promoted one will not
have. The Sentinels declare a silent primary down after `DOWN_AFTER_MS` and promote the replica; the old
primary, restarted, is turned into a replica of the new one by the Sentinels.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import redis

from podherd.harness.servers import (
    START_TIMEOUT,
    Server,
    ServerUnavailable,
    start_binary,
    start_redis_binary,
    wait_redis,
)

T = TypeVar("T")
MASTER = "podherd"
DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 4000
MAX_LAG_S = 5  # a replica silent this long does not count for min-replicas-to-write
# What a node answers in the middle of a failover (refused, LOADING, no primary agreed on yet): looked again.
_IN_FAILOVER = (redis.RedisError, OSError, ServerUnavailable, StopIteration)
FENCED = ["--min-replicas-to-write", "1", "--min-replicas-max-lag", str(MAX_LAG_S)]
# A replica (re)joining is sent the data at once, not after the default 5 s wait for other replicas to join.
SYNC_AT_ONCE = ["--repl-diskless-sync-delay", "0"]


@dataclass
class RedisSentinelTopology:
    """The data nodes (the primary first, at start) and the Sentinels watching them."""

    data: list[Server]
    sentinels: list[Server]
    master_name: str = MASTER
    workdir: Path | None = None
    password: str | None = None  # every node's and Sentinel's (requirepass), as the Valkey chart sets auth up
    _owned: bool = field(default=False, repr=False)

    @property
    def addresses(self) -> list[str]:
        return [f"127.0.0.1:{s.port}" for s in self.sentinels]

    def config(self) -> dict[str, Any]:
        """Podherd's `redis` section for it."""
        sentinel: dict[str, Any] = {"masterName": self.master_name, "addresses": self.addresses}
        if self.password is None:
            return {"url": "redis://", "sentinel": sentinel}
        return {"url": f"redis://:{self.password}@/0", "sentinel": {**sentinel, "usePassword": True}}

    def client(self, server: Server) -> redis.Redis:
        """A connection to one node or Sentinel, authenticated when they require it."""
        return redis.Redis(port=server.port, socket_timeout=2, password=self.password)

    def primary(self) -> Server:
        """The data node most Sentinels name as primary now (one may still be catching up on a failover)."""
        named: list[int] = []
        for sentinel in self.sentinels:
            try:
                with self.client(sentinel) as ask:
                    _, port = ask.sentinel_get_master_addr_by_name(self.master_name)
            except (redis.RedisError, TypeError):
                continue
            named.append(int(port))
        for port in set(named):
            if named.count(port) * 2 > len(self.sentinels):
                return next(s for s in self.data if s.port == port)
        raise ServerUnavailable(f"the Sentinels do not agree on a primary yet: {named}")

    def until_primary_is_not(self, old: Server, within: float = 30.0) -> Server:
        """The Sentinels promoted another data node (and it answers as a primary)."""

        def promoted() -> Server | None:
            current = self.primary()
            return current if current is not old and self.role(current) == "master" else None

        return _until(promoted, within, f"no failover from {old.url}")

    def until_replicating(self, server: Server, within: float = 60.0) -> None:
        """`server` is a replica in sync with the primary (the old primary, restarted, turned by the
        Sentinels), and the primary counts it for min-replicas-to-write."""

        def in_sync() -> bool:
            with self.client(server) as node:
                info = node.info("replication")
            if info.get("role") != "slave" or info.get("master_link_status") != "up":
                return False
            with self.client(self.primary()) as primary:
                return int(primary.info("replication").get("connected_slaves", 0)) >= 1

        _until(in_sync, within, f"{server.url} did not become a replica")

    def rejoin(self, old: Server, within: float = 60.0) -> None:
        """Start a stopped data node again as a replica of the primary now (as an operator bringing the old
        primary back does; the Sentinels would turn it too, on their next look), and wait until in sync."""
        primary = self.until_primary_is_not(old, within)
        argv = list(old._argv)
        if "--replicaof" in argv:
            at = argv.index("--replicaof")
            del argv[at : at + 3]
        old._argv = [*argv, "--replicaof", "127.0.0.1", str(primary.port)]
        old.restart()
        self.until_replicating(old, within)

    def role(self, server: Server) -> str:
        with self.client(server) as node:
            return str(node.info("replication").get("role"))

    def stop(self) -> None:
        for server in [*self.sentinels, *self.data]:
            server.stop()
        if self._owned and self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)


def start_redis_sentinel(
    binary: str, workdir: Path | None = None, *, password: str | None = None, extra: Sequence[str] = ()
) -> RedisSentinelTopology:
    """A primary, its replica and three Sentinels (all requiring `password`, if given); returns once the
    replica is in sync and every Sentinel knows both. `extra`: more of the data nodes' flags (their users)."""
    root = Path(tempfile.mkdtemp(prefix="podherd-redis-ha-")) if workdir is None else workdir
    auth = [] if password is None else ["--requirepass", password, "--masterauth", password]
    data = [*FENCED, *SYNC_AT_ONCE, *auth, *extra]
    primary = start_redis_binary(binary, root / "data-1", extra=data)
    replica = start_redis_binary(
        binary, root / "data-2", extra=[*data, "--replicaof", "127.0.0.1", str(primary.port)]
    )
    topology = RedisSentinelTopology(
        [primary, replica], [], workdir=root, password=password, _owned=workdir is None
    )
    try:
        for index in range(3):
            directory = root / f"sentinel-{index + 1}"
            topology.sentinels.append(_sentinel(binary, directory, primary.port, password=password))
        topology.until_replicating(replica, START_TIMEOUT)
        _until_sentinels_know(topology, START_TIMEOUT)
    except (TimeoutError, OSError, ServerUnavailable) as exc:
        topology.stop()
        raise ServerUnavailable(f"redis with sentinels did not form: {exc}") from exc
    return topology


def _sentinel(binary: str, data: Path, primary_port: int, *, password: str | None) -> Server:
    auth = "" if password is None else f"sentinel auth-pass {MASTER} {password}\nrequirepass {password}\n"

    def argv_for(port: int, directory: Path) -> list[str]:
        conf = directory / "sentinel.conf"  # Sentinel rewrites it: its own file, writable
        conf.write_text(
            auth + f"port {port}\nbind 127.0.0.1\ndir {directory}\n"
            f"sentinel monitor {MASTER} 127.0.0.1 {primary_port} 2\n"
            f"sentinel down-after-milliseconds {MASTER} {DOWN_AFTER_MS}\n"
            f"sentinel failover-timeout {MASTER} {FAILOVER_TIMEOUT_MS}\n"
            f"sentinel parallel-syncs {MASTER} 1\n"
        )
        return [binary, str(conf), "--sentinel"]

    return start_binary(
        kind="sentinel", scheme="redis", binary=binary, argv_for=argv_for, wait=wait_redis, workdir=data
    )


def _until_sentinels_know(topology: RedisSentinelTopology, within: float) -> None:
    def knows(sentinel: Server) -> bool:
        with topology.client(sentinel) as ask:
            state = ask.sentinel_master(MASTER)
        return int(state.get("num-slaves", 0)) >= 1 and int(state.get("num-other-sentinels", 0)) >= 2

    _until(
        lambda: all(knows(s) for s in topology.sentinels),
        within,
        "the Sentinels did not learn of the replica and of each other",
    )


def _until(check: Callable[[], T | None], within: float, failing: str) -> T:
    """`check`'s first truthy answer, asked every 0.1 s; what a node answers mid-failover (refused,
    LOADING, no primary agreed on yet) counts as not yet. TimeoutError, saying `failing`, after `within`."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        with contextlib.suppress(*_IN_FAILOVER):
            found = check()
            if found:
                return found
        time.sleep(0.1)
    raise TimeoutError(f"{failing} within {within:.0f}s")
