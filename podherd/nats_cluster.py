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

from podherd.servers import _LIVE, START_TIMEOUT, Server, ServerUnavailable, _spawn, _wait_nats, free_port


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
    ports = [(free_port(), free_port(), free_port()) for _ in range(size)]  # client, route, monitoring
    routes = ", ".join(f"nats-route://127.0.0.1:{route}" for _, route, _ in ports)
    limit = f", max_file_store: {max_file_store}" if max_file_store is not None else ""
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
    cluster = NatsCluster(servers, [monitor for _, _, monitor in ports])
    if workdir is None:
        servers[-1]._stop = lambda: shutil.rmtree(data, ignore_errors=True)
    try:
        for server, (_, _, monitor) in zip(servers, ports, strict=True):
            _wait_nats(server.host, server.port, START_TIMEOUT)
            _wait_healthy(monitor, START_TIMEOUT)
    except (TimeoutError, OSError) as exc:
        cluster.stop()
        raise ServerUnavailable(f"nats cluster of {size} did not form: {exc}") from exc
    return cluster


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
