"""Redis as each service's own ACL user (`shared.ledger.acl`), on a real server: a user may touch only its
own key families and the ledger, may never empty or reconfigure the server, and its password comes from a
file read for each new connection; the services carry jobs end to end as those users."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable
from pathlib import Path

import nats
import pytest
import redis
import redis.exceptions

from bench.topology import Single, start_servers
from kubesim.sim import SimHandle
from podherd.client import signed
from podherd.harness.servers import Server, find_redis_binary, start_redis_binary
from shared.api import codec
from shared.api.messages import MigrationIntent, PodKey
from shared.config.model import RedisConfig
from shared.intake.intent_jobs import job_name
from shared.ledger.acl import NEVER, REDIS_SERVICES, config_lines, rule
from shared.nats import bus
from shared.redis import client as redis_client
from shared.redis.durable import Durability, NotDurable
from tests.e2e.pipeline import ended, pipeline, pipeline_config, until_job
from tests.e2e.test_lifecycle import cluster, start, web_pods
from tests.e2e.test_pipeline import when_served

pytestmark = pytest.mark.integration


def make_users(server: Server, prefix: str, directory: Path) -> dict[str, RedisConfig]:
    """Each service's user, named for this test (the server is shared), its password in a file."""
    admin = redis.Redis.from_url(server.url)
    users = {}
    for service in ("arbitrator", "tracker"):
        name, password = f"{prefix}-{service}", secrets.token_urlsafe(16)
        admin.execute_command("ACL", "SETUSER", name, "reset", *rule(service, prefix), f">{password}")  # type: ignore[no-untyped-call]
        path = directory / f"{service}.password"
        path.write_text(password + "\n")
        users[service] = RedisConfig(
            url=server.url, key_prefix=prefix, username=name, password_file=str(path)
        )
    admin.close()
    return users


def as_user(config: RedisConfig) -> redis.Redis:
    password = Path(config.password_file or "").read_text().strip()
    return redis.Redis.from_url(config.url, username=config.username, password=password)


def test_each_service_touches_only_its_keys_and_never_the_server(
    redis_srv: Server, test_id: str, tmp_path: Path
) -> None:
    users = make_users(redis_srv, test_id, tmp_path)
    arbitrator, tracker = as_user(users["arbitrator"]), as_user(users["tracker"])
    try:
        arbitrator.set(f"{test_id}:arbitrator:x", 1)
        arbitrator.sadd("{" + test_id + "}:ledger:slots:x", "job")  # the ledger is both's
        tracker.hset(f"{test_id}:tracker:phases", "job", "Running")
        tracker.srem("{" + test_id + "}:ledger:slots:x", "job")
        for client, key in (
            (arbitrator, f"{test_id}:tracker:phases"),
            (tracker, f"{test_id}:arbitrator:jobs"),
            (tracker, f"{test_id}:facts:pod"),
            (arbitrator, "other:arbitrator:jobs"),  # another deployment's
        ):
            with pytest.raises(redis.exceptions.NoPermissionError):
                client.get(key)
        for client in (arbitrator, tracker):
            for command in (("FLUSHALL",), ("CONFIG", "GET", "maxmemory"), ("KEYS", "*"), ("ACL", "LIST")):
                with pytest.raises(redis.exceptions.NoPermissionError):
                    client.execute_command(*command)  # type: ignore[no-untyped-call]
        assert not {c.split("|")[0] for c in rule("tracker", test_id) + rule("arbitrator", test_id)} & {
            f"+{c}" for c in NEVER
        }
    finally:
        arbitrator.close()
        tracker.close()


async def test_each_service_may_run_every_command_its_own_code_sends(
    redis_srv: Server, test_id: str, tmp_path: Path
) -> None:
    """What only a failover or a flush makes a service send: the WAIT barrier's INCR (redis.sentinel) and
    the resync's ZSCORE. Refused, a service would never act on an admission, or never find a job again."""
    users = make_users(redis_srv, test_id, tmp_path)
    for service, config in users.items():
        client = redis_client.connect(config)
        try:
            barrier = Durability(client, replicas=1, timeout=0.05, key=f"{test_id}:barrier")
            with pytest.raises(NotDurable):  # no replica to wait for: not durable, and not refused
                await barrier.confirm()
            if service == "tracker":
                assert await client.zscore(f"{test_id}:tracker:deadlines", "job") is None
        finally:
            await client.aclose()


async def test_a_password_rotated_in_its_file_counts_from_the_next_connection(
    redis_srv: Server, test_id: str, tmp_path: Path
) -> None:
    config = make_users(redis_srv, test_id, tmp_path)["tracker"]
    client = redis_client.connect(config)
    try:
        assert await client.ping()
        rotated = secrets.token_urlsafe(16)
        admin = redis.Redis.from_url(redis_srv.url)
        admin.execute_command("ACL", "SETUSER", config.username, "resetpass", f">{rotated}")  # type: ignore[no-untyped-call]
        admin.close()
        await asyncio.to_thread(Path(config.password_file or "").write_text, rotated)
        await client.connection_pool.disconnect()  # as after a network blip: the next connection is new
        assert await client.ping()  # and it authenticates with the new password: no restart
    finally:
        await client.aclose()


async def carry_two_jobs(
    kubesim_factory: Callable[..., SimHandle],
    nats_srv: Server,
    redis_srv: Server,
    test_id: str,
    users: dict[str, RedisConfig],
) -> list[str]:
    """Two pods moved through the four services, the arbitrator and the tracker each as its `users` entry:
    the jobs' phases."""
    kube = start(kubesim_factory, cluster())
    config = pipeline_config(kube.handle, nats_srv, redis_srv, test_id)
    pods = sorted(web_pods(kube))[:2]
    async with pipeline(config, redis_users=users):
        nc = await nats.connect(nats_srv.url)
        intents = [
            MigrationIntent(
                idempotency_key=f"{test_id}-{p}", pod=PodKey(namespace="default", name=p), requester="t"
            )
            for p in pods
        ]
        try:
            for intent in intents:
                await when_served(nc, bus.Subjects(test_id), codec.encode(intent), signed(config))
        finally:
            await nc.close()
        jobs = [await until_job(kube, job_name(i.idempotency_key), ended) for i in intents]
    return [str(j["status"]["phase"]) for j in jobs]


async def test_the_services_carry_jobs_as_their_own_redis_users(
    kubesim_factory: Callable[..., SimHandle],
    nats_srv: Server,
    redis_srv: Server,
    test_id: str,
    tmp_path: Path,
) -> None:
    users = make_users(redis_srv, test_id, tmp_path)
    assert await carry_two_jobs(kubesim_factory, nats_srv, redis_srv, test_id, users) == ["Succeeded"] * 2


def test_the_users_as_server_configuration_work_and_keep_no_password(tmp_path: Path, test_id: str) -> None:
    """deploy/ha's way: the users in the server's configuration (the chart's commonConfiguration), each
    password only as its SHA-256."""
    binary = find_redis_binary()
    if binary is None:
        pytest.skip("no valkey/redis binary")
    passwords = {service: secrets.token_urlsafe(16) for service in REDIS_SERVICES}
    conf = tmp_path / "users.conf"
    conf.write_text(config_lines(test_id, passwords))
    assert not [p for p in passwords.values() if p in conf.read_text()]
    server = start_redis_binary(binary, tmp_path / "redis", extra=["--include", str(conf)])
    try:
        url = server.url
        tracker = redis.Redis.from_url(url, username="podherd-tracker", password=passwords["tracker"])
        tracker.hset(f"{test_id}:tracker:phases", "job", "Running")
        with pytest.raises(redis.exceptions.NoPermissionError):
            tracker.flushall()
        with pytest.raises(redis.exceptions.NoPermissionError):
            tracker.get(f"{test_id}:arbitrator:jobs")
        tracker.close()
        wrong = redis.Redis.from_url(url, username="podherd-arbitrator", password=passwords["tracker"])
        with pytest.raises(redis.exceptions.AuthenticationError):
            wrong.ping()
        wrong.close()
    finally:
        server.stop()


def test_the_chaos_runs_servers_keep_each_services_user_across_a_restart(tmp_path: Path) -> None:
    """The chaos run's Redis, as deploy/ has it: a user per service, kept when a fault restarts the server."""
    servers = start_servers("single", tmp_path, prefixes=("chaos",))
    try:
        if not servers.redis_users:
            pytest.skip("no valkey/redis binary: the run's Redis is not its own to configure")
        user, password = servers.redis_users["tracker"]
        assert isinstance(servers, Single)
        for _ in range(2):  # before and after a restart
            client = redis.Redis.from_url(servers.redis.url, username=user, password=password.read_text())
            client.hset("chaos:tracker:phases", "job", "Running")
            with pytest.raises(redis.exceptions.NoPermissionError):
                client.get("chaos:arbitrator:jobs")
            client.close()
            servers.redis.restart()
    finally:
        servers.stop()
