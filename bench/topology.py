"""The NATS and Redis a benchmark or the chaos run works against, and the faults each can suffer.

- `single`: one nats-server and one Redis (the suite's and the demo's); faults: NATS restarted, Redis
  restarted, Redis flushed.
- `ha`: production's topology: a three-node JetStream cluster (every stream and KV bucket at replicas 3)
  and a primary, a replica and three Sentinels; faults: the leader of every stream and KV bucket SIGKILLed
  in turn (each restarted once current again), a node SIGKILLed and restarted, the Redis primary SIGKILLed
  (the Sentinels promote the replica) and brought back as a replica.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import msgspec
import nats
import redis as sync_redis
import redis.asyncio as aioredis

from podherd import nats_pki
from podherd.credentials import new_passwords
from podherd.harness.nats_cluster import NatsCluster, start_nats_cluster
from podherd.harness.nats_faults import kill_every_leader, raft_groups
from podherd.harness.redis_topology import RedisSentinelTopology, start_redis_sentinel
from podherd.harness.servers import (
    Server,
    ServerUnavailable,
    find_nats_binary,
    find_redis_binary,
    nats_server,
    redis_server,
    start_redis_binary,
)
from podherd.nats_pki import HARNESS, Pki
from shared.config.loader import config_from_dict
from shared.config.model import nats_servers
from shared.ledger.acl import config_lines
from shared.nats import bus
from shared.redis import client as redis_client

SINGLE_FAULTS = ("nats_restart", "redis_restart", "redis_flush")
HA_FAULTS = ("nats_leader_kills", "nats_node_kill", "redis_failover")


class Servers(Protocol):
    faults: tuple[str, ...]

    @property
    def nats_url(self) -> str: ...

    def redis_section(self) -> dict[str, Any]: ...

    def nats_section(self) -> dict[str, Any]: ...

    @property
    def pki(self) -> Pki | None: ...

    async def inflict(self, fault: str, prefix: str, rng: random.Random) -> bool: ...

    @property
    def redis_users(self) -> dict[str, tuple[str, Path]]: ...

    def origin(self) -> dict[str, str]: ...

    def stop(self) -> None: ...


def redis_of(servers: Servers, prefix: str) -> aioredis.Redis:
    """A client of the run's Redis, as the services connect (through the Sentinels too)."""
    return redis_client.connect(
        config_from_dict({"redis": {**servers.redis_section(), "keyPrefix": prefix}}).redis
    )


@dataclass
class Single:
    nats: Server
    redis: Server
    faults: tuple[str, ...] = SINGLE_FAULTS
    pki: Pki | None = None
    redis_users: dict[str, tuple[str, Path]] = field(default_factory=dict)  # (user, password file)

    @property
    def nats_url(self) -> str:
        return self.nats.url

    def redis_section(self) -> dict[str, Any]:
        return {"url": self.redis.url}

    def nats_section(self) -> dict[str, Any]:
        return {"url": self.nats.url, **harness_tls(self.pki)}

    async def inflict(self, fault: str, prefix: str, rng: random.Random) -> bool:
        if fault == "nats_restart" and self.nats.managed:
            await asyncio.to_thread(self.nats.restart)
        elif fault == "redis_restart" and self.redis.managed:
            await asyncio.to_thread(self.redis.restart)
        elif fault == "redis_flush":
            client = sync_redis.from_url(self.redis.url)
            try:
                client.flushall()
            finally:
                client.close()
        else:
            return False
        return True

    def origin(self) -> dict[str, str]:
        return {"nats": self.nats.origin, "redis": self.redis.origin}

    def stop(self) -> None:
        self.nats.stop()
        self.redis.stop()


@dataclass
class HighlyAvailable:
    nats: NatsCluster
    redis: RedisSentinelTopology
    faults: tuple[str, ...] = HA_FAULTS
    pki: Pki | None = None
    redis_users: dict[str, tuple[str, Path]] = field(default_factory=dict)  # (user, password file)

    @property
    def nats_url(self) -> str:
        return self.nats.url

    def redis_section(self) -> dict[str, Any]:
        return self.redis.config()

    def nats_section(self) -> dict[str, Any]:
        return {"url": self.nats.url, "replicas": 3, **harness_tls(self.pki)}

    async def inflict(self, fault: str, prefix: str, rng: random.Random) -> bool:
        if fault == "nats_leader_kills":
            groups = raft_groups(bus.Subjects(prefix))
            nc = await nats.connect(nats_servers(self.nats.url), **nats_options(self))
            try:
                await kill_every_leader(nc.jetstream(), self.nats, groups)
            finally:
                await nc.close()
        elif fault == "nats_node_kill":
            node = rng.choice(self.nats.servers)
            node.kill()
            await asyncio.sleep(rng.uniform(1.0, 3.0))
            await asyncio.to_thread(self.nats.restart, node)
        elif fault == "redis_failover":
            old = await asyncio.to_thread(self.redis.primary)
            old.kill()
            await asyncio.to_thread(self.redis.until_primary_is_not, old)
            await asyncio.to_thread(self.redis.rejoin, old)
        else:
            return False
        return True

    def origin(self) -> dict[str, str]:
        return {"nats": "3-node JetStream cluster", "redis": "primary, replica, 3 Sentinels"}

    def stop(self) -> None:
        self.nats.stop()
        self.redis.stop()


def harness_tls(pki: Pki | None) -> dict[str, Any]:
    """The run's configuration is the harness's (the services get their own certificates): its TLS."""
    return {} if pki is None else {"tls": msgspec.to_builtins(pki.tls(HARNESS))}


def nats_options(servers: Servers) -> dict[str, Any]:
    """nats-py's options for the harness's own connections."""
    return {} if servers.pki is None else servers.pki.options(HARNESS)


def start_servers(
    topology: str, work: Path, *, max_file_store: int | None = None, prefixes: tuple[str, ...] = ()
) -> Servers:
    """The run's servers; with `prefixes`, as deploy/ runs them for deployments under them: NATS over TLS,
    one user per service by certificate, and Redis with a user of its own for each service that uses it
    (in the data nodes' configuration, so a restart keeps them; the run's own faults and checks are the
    default user's)."""
    pki = nats_pki.issue(work / "pki", nats_pki.TEST_USERS) if prefixes else None
    conf = pki.server_conf(*prefixes, harness=True) if pki is not None else ""
    redis_binary = find_redis_binary()
    include, users = _redis_users(work, prefixes) if prefixes and redis_binary else ([], {})
    if topology == "single":
        nats = nats_server(work / "nats", conf=conf)
        if redis_binary is not None and include:
            return Single(
                nats,
                start_redis_binary(redis_binary, work / "redis", extra=include),
                pki=pki,
                redis_users=users,
            )
        return Single(nats, redis_server(work / "redis"), pki=pki)
    nats_binary = find_nats_binary()
    if nats_binary is None or redis_binary is None:
        raise ServerUnavailable(
            "--topology ha needs nats-server and valkey-server binaries (the embedded extra)"
        )
    cluster = start_nats_cluster(nats_binary, 3, work / "nats", max_file_store=max_file_store, conf=conf)
    try:
        redis = start_redis_sentinel(redis_binary, work / "redis", extra=include)
        return HighlyAvailable(cluster, redis, pki=pki, redis_users=users)
    except Exception:
        cluster.stop()
        raise


def _redis_users(work: Path, prefixes: tuple[str, ...]) -> tuple[list[str], dict[str, tuple[str, Path]]]:
    """The flags giving a Redis server the services' users for `prefixes`; each user's password file."""
    work.mkdir(parents=True, exist_ok=True)
    passwords = new_passwords()
    conf = work / "redis-users.conf"
    conf.write_text(config_lines(prefixes[0], passwords, *prefixes[1:]))
    users = {}
    for service, password in passwords.items():
        path = work / f"redis-{service}.password"
        path.write_text(password)
        users[service] = (f"podherd-{service}", path)
    return ["--include", str(conf)], users
