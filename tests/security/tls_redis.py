"""The TLS-only Redis of the tests of `redis.tls` (`podherd.harness.tls_redis`), with a CA of its own; where
no TLS-capable redis-server could be had, the tests that need it skip and say why."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from podherd.harness.servers import Server
from podherd.harness.tls_redis import UNPACKED, find_tls_redis_binary, start_tls_redis
from shared.access.authority import Authority
from shared.config.model import Tls


@dataclass(frozen=True)
class TlsRedis:
    server: Server
    authority: Authority
    directory: Path

    @property
    def url(self) -> str:
        return f"rediss://localhost:{self.server.port}/0"

    def tls(self, authority: Authority | None = None, *, client: str | None = None) -> Tls:
        """Files trusting `authority` (this server's by default), with a client certificate for `client`."""
        authority = authority or self.authority
        name = f"{authority.cert.serial_number:x}"
        ca = self.directory / f"ca-{name}.crt"
        ca.write_bytes(authority.pem)
        if client is None:
            return Tls(ca=str(ca))
        cert, key = authority.leaf(client, client=True)
        paths = self.directory / f"{client}-{name}.crt", self.directory / f"{client}-{name}.key"
        paths[0].write_bytes(cert)
        paths[1].write_bytes(key)
        return Tls(ca=str(ca), cert=str(paths[0]), key=str(paths[1]))


def tls_redis_for_tests(directory: Path) -> TlsRedis:
    binary = find_tls_redis_binary()
    if binary is None:
        pytest.skip(f"no TLS-capable redis-server (scripts/install_tls_redis.sh unpacks one at {UNPACKED})")
    authority = Authority.new("podherd-test-redis-ca")
    return TlsRedis(
        start_tls_redis(binary, directory, authority=authority, names=("localhost",)), authority, directory
    )
