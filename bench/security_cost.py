"""What TLS and ACLs cost the arbitrator, side by side in one run: the same redis-server (one built with TLS)
and the same nats-server, once plain and open, once as deploy/ runs them: Redis over TLS only, as the
arbitrator's ACL user with its password from a file; NATS over TLS, the client known by its certificate."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import msgspec

from bench.admission_run import new_prefix, run_depth
from podherd import nats_pki
from podherd.demo.cluster import redis_users
from podherd.harness.servers import Server, find_nats_binary, start_nats_binary, start_redis_binary
from podherd.harness.tls_redis import find_tls_redis_binary, start_tls_redis
from shared.access.authority import Authority

COMPARED = (
    "burst_admitted",
    "offered_admitted",
    "decisions_per_second",
    "latency_ms_p50",
    "latency_ms_p99",
    "arbitrator_cpu_us_per_decision",
    "redis_cpu_us_per_decision",
)


async def compare(pending: int, burst: int, rate: float, offered: int) -> dict[str, Any]:
    redis_binary, nats_binary = find_tls_redis_binary(), find_nats_binary()
    if redis_binary is None or nats_binary is None:
        raise SystemExit(
            "--secured needs nats-server and a redis-server built with TLS (scripts/install_tls_redis.sh)"
        )
    prefix = new_prefix(pending)
    with tempfile.TemporaryDirectory(prefix="podherd-bench-tls-") as name:
        directory = Path(name)
        authority = Authority.new("podherd-bench-ca")
        pki = nats_pki.issue(directory / "pki", nats_pki.TEST_USERS, authority=authority)
        servers: list[Server] = []
        try:
            servers += [start_redis_binary(redis_binary), start_nats_binary(nats_binary)]
            plain = await run_depth(
                {"url": servers[0].url}, servers[1].url, pending, burst, rate, offered, prefix=prefix
            )
            servers += [
                start_tls_redis(redis_binary, directory / "redis", authority=authority, names=("localhost",)),
                start_nats_binary(nats_binary, conf=pki.server_conf(prefix, harness=True)),
            ]
            url = f"rediss://localhost:{servers[2].port}/0"
            admin = {"url": url, "tls": {"ca": str(pki.ca)}}
            arbitrator = {**admin, **_acl_user(url, pki.ca, prefix, directory)}
            nats = {"url": servers[3].url, "tls": msgspec.to_builtins(pki.tls(nats_pki.HARNESS))}
            secured = await run_depth(
                arbitrator, nats, pending, burst, rate, offered, prefix=prefix, server_redis=admin
            )
        finally:
            for server in servers:
                server.stop()
    return {
        "pending": pending,
        **{f"{key}_plain": plain[key] for key in COMPARED},
        **{f"{key}_tls_acl": secured[key] for key in COMPARED},
        "decisions_ratio_tls_acl_to_plain": round(
            secured["decisions_per_second"] / plain["decisions_per_second"], 2
        ),
    }


def _acl_user(url: str, ca: Path, prefix: str, directory: Path) -> dict[str, str]:
    """The arbitrator's ACL user (`podherd config --redis-acl`, as the in-cluster demo makes it), its
    password in a file."""
    password = directory / "arbitrator.password"
    password.write_text(redis_users(url, ca, prefix)["arbitrator"])
    return {"username": "podherd-arbitrator", "passwordFile": str(password)}
