"""A JetStream cluster of nats-server binaries on loopback ports (the demo's in-cluster NATS, the tests and
the chaos run's production topology): routed into one cluster, each member with its monitoring port."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from podherd.harness.servers import (
    _LIVE,
    START_TIMEOUT,
    Server,
    ServerUnavailable,
    _spawn,
    _wait_nats,
    free_port,
)


@dataclass
class NatsCluster:
    """A JetStream cluster of nats-server binaries on loopback ports (streams with `nats.replicas` > 1)."""

    servers: list[Server]
    monitors: list[int] = field(default_factory=list)  # each server's monitoring port, in order

    @property
    def url(self) -> str:
        return ",".join(server.url for server in self.servers)

    def restart(self, server: Server) -> None:
        """Start a killed member again; returns once it is current with the cluster (/healthz)."""
        server.restart()
        _wait_healthy(self.monitors[self.servers.index(server)], START_TIMEOUT)

    def stop(self) -> None:
        for server in self.servers:
            server.stop()


def start_nats_cluster(
    binary: str,
    size: int = 3,
    workdir: Path | None = None,
    *,
    max_file_store: int | None = None,
    conf: str = "",
) -> NatsCluster:
    """`size` nats-servers routed into one JetStream cluster; returns once its meta leader is elected.
    `conf`: more of each member's configuration (TLS, accounts)."""
    data = Path(tempfile.mkdtemp(prefix="podherd-nats-cluster-")) if workdir is None else workdir
    limit = f", max_file_store: {max_file_store}" if max_file_store is not None else ""
    last: Exception | None = None
    for _ in range(3):  # a free port can be taken by another process between choosing it and binding it
        cluster = _start(binary, size, data, limit=limit, conf=conf)
        try:
            for server, monitor in zip(cluster.servers, cluster.monitors, strict=True):
                _wait_member(server, monitor)
        except (TimeoutError, OSError) as exc:
            cluster.stop()
            last = exc
            continue
        if workdir is None:
            cluster.servers[-1]._stop = lambda: shutil.rmtree(data, ignore_errors=True)
        return cluster
    if workdir is None:
        shutil.rmtree(data, ignore_errors=True)
    raise ServerUnavailable(f"nats cluster of {size} did not form: {last}") from last


def _start(binary: str, size: int, data: Path, *, limit: str, conf: str) -> NatsCluster:
    ports = [(free_port(), free_port(), free_port()) for _ in range(size)]  # client, route, monitoring
    routes = ", ".join(f"nats-route://127.0.0.1:{route}" for _, route, _ in ports)
    servers: list[Server] = []
    for index, (client, route, monitor) in enumerate(ports):
        node = data / f"n{index + 1}"
        node.mkdir(parents=True, exist_ok=True)
        path = node / "nats.conf"
        path.write_text(
            f"server_name: podherd-n{index + 1}\nlisten: 127.0.0.1:{client}\nhttp: 127.0.0.1:{monitor}\n"
            f"jetstream {{ store_dir: {json.dumps(str(node / 'jetstream'))}{limit} }}\n"
            f"cluster {{ name: podherd, listen: 127.0.0.1:{route}, routes: [{routes}],"
            " no_advertise: true }\n" + conf
        )
        argv = [binary, "-c", str(path)]
        server = Server(
            "nats", f"nats://127.0.0.1:{client}", f"binary:{binary}", port=client, workdir=node,
            _argv=argv, _process=_spawn(argv, node, "nats"), _ready=_wait_nats,
        )  # fmt: skip
        servers.append(server)
        _LIVE.append(server)
    return NatsCluster(servers, [monitor for _, _, monitor in ports])


def _wait_member(server: Server, monitor: int) -> None:
    """Until `server` answers and is current with the cluster; a member that exited (its port was taken)
    fails at once rather than after the whole timeout."""
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        if server._process is not None and server._process.poll() is not None:
            raise OSError(f"nats-server on port {server.port} exited ({server._process.returncode})")
        try:
            _wait_nats(server.host, server.port, 0.5)
            break
        except (TimeoutError, OSError):
            if time.monotonic() > deadline:
                raise
    _wait_healthy(monitor, max(deadline - time.monotonic(), 1.0))


def _wait_healthy(monitor_port: int, timeout: float) -> None:
    """nats-server's /healthz answers 200 once its JetStream is current with the cluster's meta leader."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{monitor_port}/healthz", timeout=1.0) as answer:
                if answer.status == 200:
                    return
        except (OSError, ValueError) as exc:
            last = str(exc)
        time.sleep(0.1)
    raise TimeoutError(f"nats /healthz on port {monitor_port} not ok within {timeout:.0f}s ({last})")
