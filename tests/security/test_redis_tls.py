"""Redis over TLS (`redis.tls`), on a real TLS-only server: the services verify the server against the
configured CA and its host name, authenticate as their ACL users inside the encrypted connection, take a
renewed CA or client certificate from the next connection on without a restart, and carry jobs end to end."""

from __future__ import annotations

import asyncio
import os
import ssl
from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec
import pytest
import redis.asyncio as aioredis
import redis.exceptions

from kubesim.sim import SimHandle
from podherd.harness.servers import Server
from shared.access.authority import Authority
from shared.config.loader import config_from_dict
from shared.config.model import ConfigError, RedisConfig
from shared.redis import client as redis_client
from tests.security.test_redis_access import carry_two_jobs, make_users
from tests.security.tls_redis import TlsRedis, tls_redis_for_tests

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tls_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsRedis]:
    found = tls_redis_for_tests(tmp_path_factory.mktemp("redis-tls"))
    yield found
    found.server.stop()


def users_over_tls(found: TlsRedis, prefix: str, directory: Path) -> dict[str, RedisConfig]:
    admin = Server("redis", f"{found.url}?ssl_ca_certs={found.directory / 'ca.crt'}", "test")
    return {
        service: msgspec.structs.replace(config, url=found.url, tls=found.tls())
        for service, config in make_users(admin, prefix, directory).items()
    }


async def refused(config: RedisConfig) -> BaseException:
    client = redis_client.connect(config)
    try:
        with pytest.raises((redis.exceptions.ConnectionError, ssl.SSLError)) as caught:
            await client.ping()
        return caught.value
    finally:
        await client.aclose()


async def test_a_service_user_talks_to_redis_only_over_verified_tls(
    tls_redis: TlsRedis, test_id: str, tmp_path: Path
) -> None:
    config = users_over_tls(tls_redis, test_id, tmp_path)["tracker"]
    client = redis_client.connect(config)
    try:
        assert await client.ping()
        admin = aioredis.from_url(f"{tls_redis.url}?ssl_ca_certs={tls_redis.directory / 'ca.crt'}")
        connected = [c["user"] for c in await admin.client_list()]
        await admin.aclose()
        assert config.username in connected  # authenticated as its ACL user, inside TLS
        with pytest.raises(redis.exceptions.NoPermissionError):
            await client.flushall()
    finally:
        await client.aclose()
    # no plain-text port at all, a server certificate of another CA, a name the certificate does not carry
    plain = aioredis.from_url(f"redis://127.0.0.1:{tls_redis.server.port}", socket_connect_timeout=5)
    with pytest.raises(redis.exceptions.ConnectionError):
        await plain.ping()
    await plain.aclose()
    foreign = tls_redis.tls(Authority.new("another-ca"))
    assert "certificate verify failed" in str(await refused(msgspec.structs.replace(config, tls=foreign)))
    by_ip = msgspec.structs.replace(config, url=f"rediss://127.0.0.1:{tls_redis.server.port}/0")
    assert "mismatch" in str(await refused(by_ip))  # the server's certificate names localhost only
    # ... unless told the name to check it for (a port-forward): `redis.tls.serverName`
    assert config.tls is not None
    named = msgspec.structs.replace(by_ip, tls=msgspec.structs.replace(config.tls, server_name="localhost"))
    client = redis_client.connect(named)
    try:
        assert await client.ping()
    finally:
        await client.aclose()


async def test_a_client_certificate_of_another_ca_is_refused_by_the_server(
    tls_redis: TlsRedis, test_id: str, tmp_path: Path
) -> None:
    config = users_over_tls(tls_redis, test_id, tmp_path)["arbitrator"]
    own = tls_redis.tls(client="podherd-arbitrator")
    client = redis_client.connect(msgspec.structs.replace(config, tls=own))
    try:
        assert await client.ping()
    finally:
        await client.aclose()
    stranger = tls_redis.tls(Authority.new("another-ca"), client="podherd-arbitrator")
    await refused(
        msgspec.structs.replace(
            config, tls=msgspec.structs.replace(own, cert=stranger.cert, key=stranger.key)
        )
    )


async def test_a_renewed_ca_file_counts_from_the_next_connection_without_a_restart(
    tls_redis: TlsRedis, test_id: str, tmp_path: Path
) -> None:
    config = users_over_tls(tls_redis, test_id, tmp_path)["tracker"]
    assert config.tls is not None and config.tls.ca is not None
    ca_file = tmp_path / "mounted-ca.crt"
    ca_file.write_bytes(Authority.new("the-old-ca").pem)  # not (yet) the server's
    client = redis_client.connect(
        msgspec.structs.replace(config, tls=msgspec.structs.replace(config.tls, ca=str(ca_file)))
    )
    try:
        with pytest.raises(redis.exceptions.ConnectionError):
            await client.ping()
        await asyncio.to_thread(ca_file.write_bytes, tls_redis.authority.pem)  # as the kubelet swaps a Secret
        stamp = ca_file.stat().st_mtime_ns + 1_000_000
        os.utime(
            ca_file, ns=(stamp, stamp)
        )  # a change the mtime shows, however coarse the file system's clock
        assert await client.ping()  # the same client: nothing restarted
    finally:
        await client.aclose()


def test_tls_and_a_unix_socket_do_not_go_together() -> None:
    with pytest.raises(ConfigError, match=r"redis\.tls.*unix socket"):
        config_from_dict({"redis": {"url": "unix:///run/redis.sock", "tls": {"ca": "/ca.crt"}}})
    with pytest.raises(ConfigError, match=r"redis\.tls.*go together"):
        config_from_dict({"redis": {"url": "rediss://r:6379/0", "tls": {"cert": "/tls.crt"}}})


async def test_the_services_carry_jobs_over_tls_as_their_own_redis_users(
    kubesim_factory: Callable[..., SimHandle],
    nats_srv: Server,
    redis_srv: Server,
    tls_redis: TlsRedis,
    test_id: str,
    tmp_path: Path,
) -> None:
    users = users_over_tls(tls_redis, test_id, tmp_path)
    assert await carry_two_jobs(kubesim_factory, nats_srv, redis_srv, test_id, users) == ["Succeeded"] * 2
