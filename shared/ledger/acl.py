"""Each service's Redis user (pure): only the commands it sends (its scripts' too: the server checks what a
script calls as its caller) and only its own key families. `podherd config --redis-acl` writes them as
`ACL SETUSER` lines; a test holds every user to them on a real server.

The arbitrator keeps the admission facts and its decisions, the tracker its jobs' state; both share the
ledger (the slots a job holds: the arbitrator takes them, the tracker releases them) and the statistics.
The watcher and the executor use no Redis. No user may run what empties or reconfigures the server
(`FLUSHALL`, `FLUSHDB`, `CONFIG`, `KEYS`, `DEBUG`, `SHUTDOWN`, …): they are never granted.
"""

from __future__ import annotations

import hashlib

from shared.ledger.keys import ledger_prefix

# Read and write the data types the services use, run their scripts, and the connection's own commands.
COMMON = (
    "get",
    "set",
    "del",
    "incrby",  # redis-py sends INCR as INCRBY
    "exists",
    "mget",
    "expire",
    "hget",
    "hset",
    "hsetnx",
    "hdel",
    "hexists",
    "hgetall",
    "hmget",
    "hlen",
    "hincrby",
    "hvals",
    "sadd",
    "srem",
    "smembers",
    "sismember",
    "scard",
    "sscan",
    "zadd",
    "zrem",
    "zscore",
    "zcard",
    "zrange",
    "zrangebyscore",
    "zpopmin",
    "zunionstore",
    "multi",
    "exec",
    "discard",
    "evalsha",
    "eval",
    "script|load",
    "script|exists",
    "time",
    "wait",
    "ping",
    "role",
    "hello",
    "client|setname",
)
EXTRA = {"arbitrator": ("scan",), "tracker": ()}
REDIS_SERVICES = tuple(EXTRA)  # the services that use Redis
NEVER = (
    "flushall",
    "flushdb",
    "config",
    "keys",
    "debug",
    "shutdown",
    "acl",
    "module",
    "replicaof",
    "migrate",
)


def keys_of(service: str, key_prefix: str) -> list[str]:
    shared = [f"{ledger_prefix(key_prefix)}*", f"{key_prefix}:stats:*", f"{key_prefix}:barrier"]
    own = {
        "arbitrator": [f"{key_prefix}:arbitrator:*", f"{key_prefix}:facts:*"],
        "tracker": [f"{key_prefix}:tracker:*"],
    }
    return [*own[service], *shared]


def rule(service: str, key_prefix: str, *more_prefixes: str) -> list[str]:
    """The ACL rule of `podherd-<service>` (no password: it is added where the user is made); with
    `more_prefixes`, for the deployments under those key prefixes too (servers shared by test runs)."""
    commands = sorted({*COMMON, *EXTRA[service]})
    patterns = [p for prefix in (key_prefix, *more_prefixes) for p in keys_of(service, prefix)]
    return [
        "on",
        "resetkeys",
        *(f"~{pattern}" for pattern in patterns),
        "resetchannels",
        "-@all",
        *(f"+{command}" for command in commands),
    ]


def setuser_lines(key_prefix: str, passwords: dict[str, str] | None = None) -> str:
    """`ACL SETUSER` for each service's user; each password as given, else `<password>` to fill in."""
    lines = []
    for service in EXTRA:
        secret = (passwords or {}).get(service)
        password = f">{secret}" if secret else "><password>"
        lines.append(" ".join(["ACL", "SETUSER", f"podherd-{service}", *rule(service, key_prefix), password]))
    return "\n".join(lines) + "\n"


def config_lines(key_prefix: str, passwords: dict[str, str], *more_prefixes: str) -> str:
    """The same users as `user` lines of a server's configuration (valkey.conf, the Valkey chart's
    `commonConfiguration`), each password only as its SHA-256 (`#<hex>`): the file may sit in a ConfigMap."""
    lines = []
    for service in EXTRA:
        digest = hashlib.sha256(passwords[service].encode()).hexdigest()
        rules = rule(service, key_prefix, *more_prefixes)
        lines.append(" ".join(["user", f"podherd-{service}", *rules, f"#{digest}"]))
    return "\n".join(lines) + "\n"
