"""The four services as separate processes, as in production: `podherd run <service>` with one config file,
each replica with its own identity, ops port, log file and (optionally) its own kubeconfig.

Used by the demo and by the tests that run the pipeline the way it is deployed.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from podherd.harness.servers import spawn_logged
from podherd.nats_pki import Pki
from services.entry import GATE, PIPELINE

SERVICES = PIPELINE  # GATE is started on its own (`start("gate")`): it needs its serving certificate


class ServiceFailed(RuntimeError):
    """A service process exited or never became ready; the message ends with its last log lines."""


_OPS_ENDPOINT = re.compile(r"ops endpoint on [^\s:]+:(\d+)")
_WEBHOOK_ENDPOINT = re.compile(r"webhook endpoint on [^\s:]+:(\d+)")


def ops_port(log: Path, endpoint: re.Pattern[str] = _OPS_ENDPOINT) -> int:
    """The ops port a service started with `http.port: 0` logged that it bound; 0 before it has."""
    found = endpoint.search(log.read_text(errors="replace")) if log.exists() else None
    return int(found.group(1)) if found else 0


def webhook_port(log: Path) -> int:
    """The HTTPS port the gate logged that it bound (`gate.port: 0`); 0 before it has."""
    return ops_port(log, _WEBHOOK_ENDPOINT)


@dataclass
class ServiceProcess:
    service: str
    replica: str
    process: subprocess.Popen[bytes]
    log: Path
    _port: int = 0

    @property
    def name(self) -> str:
        return f"{self.service}-{self.replica}"

    @property
    def port(self) -> int:
        """The ops port the service bound (it binds port 0: a port chosen here could be taken before it
        binds it); 0 until the service has logged it."""
        if not self._port:
            self._port = ops_port(self.log)
        return self._port

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/metrics"

    def alive(self) -> bool:
        return self.process.poll() is None

    def tail(self, lines: int = 20) -> str:
        if not self.log.exists():
            return ""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def ready(self) -> bool:
        if not self.port:
            return False
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=1) as answer:
                return bool(answer.status == 200)
        except (urllib.error.URLError, OSError):
            return False


@dataclass
class ServiceProcesses:
    """Starts, stops (SIGTERM, as Kubernetes does) and kills (SIGKILL) service replicas."""

    config: Path
    workdir: Path
    kubeconfigs: Mapping[str, Path] = field(default_factory=dict)  # per service, e.g. ServiceAccount tokens
    env: Mapping[str, str] = field(default_factory=dict)
    pki: Pki | None = None  # NATS by certificate: each service presents its own (its NATS user)
    # Redis as users of their own: (user, password file) by service
    redis_users: Mapping[str, tuple[str, Path]] = field(default_factory=dict)
    running: list[ServiceProcess] = field(default_factory=list)

    def start(self, service: str, replica: str = "0") -> ServiceProcess:
        if service not in (*SERVICES, GATE):
            raise ValueError(f"no service {service!r}; one of {', '.join((*SERVICES, GATE))}")
        self.workdir.mkdir(parents=True, exist_ok=True)
        log = self.workdir / f"{service}-{replica}.log"
        env = {
            **os.environ,
            "PODHERD_REPLICA": f"{service}-{replica}",
            "PODHERD_HTTP__HOST": "127.0.0.1",
            "PODHERD_HTTP__PORT": "0",
            "PODHERD_GATE__PORT": "0",
            **self.env,  # over the defaults: a gate run on the port its Service maps to
        }
        if service in self.kubeconfigs:
            env["PODHERD_KUBERNETES__KUBECONFIG"] = str(self.kubeconfigs[service])
        if self.pki is not None:
            tls = self.pki.tls(f"podherd-{service}")
            env.update(PODHERD_NATS__TLS__CA=tls.ca or "", PODHERD_NATS__TLS__CERT=tls.cert or "")
            env["PODHERD_NATS__TLS__KEY"] = tls.key or ""
        if service in self.redis_users:
            user, password = self.redis_users[service]
            env.update(PODHERD_REDIS__USERNAME=user, PODHERD_REDIS__PASSWORDFILE=str(password))
        argv = [sys.executable, "-m", "podherd", "run", service, "--config", str(self.config)]
        process = spawn_logged(argv, log, env=env)
        started = ServiceProcess(service, replica, process, log)
        self.running.append(started)
        return started

    def start_all(self, replicas: int = 1) -> list[ServiceProcess]:
        return [self.start(s, str(i)) for i in range(replicas) for s in SERVICES]

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        waiting = list(self.running)
        while waiting:
            for proc in list(waiting):
                if not proc.alive():
                    raise ServiceFailed(f"{proc.name} exited with {proc.process.returncode}:\n{proc.tail()}")
                if proc.ready():
                    waiting.remove(proc)
            if waiting and time.monotonic() > deadline:
                names = ", ".join(p.name for p in waiting)
                raise ServiceFailed(f"not ready after {timeout:.0f} s: {names}\n{waiting[0].tail()}")
            if waiting:
                time.sleep(0.1)

    def terminate(self, proc: ServiceProcess, timeout: float = 30.0) -> int:
        """SIGTERM and wait: the service finishes or hands back its in-flight work, then exits."""
        if proc.alive():
            proc.process.send_signal(signal.SIGTERM)
        return self._reap(proc, timeout)

    def _reap(self, proc: ServiceProcess, timeout: float) -> int:
        try:
            code = proc.process.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.process.kill()
            code = proc.process.wait(10)
        if proc in self.running:
            self.running.remove(proc)
        return code

    def kill(self, proc: ServiceProcess) -> None:
        proc.process.kill()
        proc.process.wait(10)
        if proc in self.running:
            self.running.remove(proc)

    def stop_all(self, timeout: float = 30.0) -> dict[str, int]:
        """SIGTERM to every replica at once, then wait for each; returns exit codes by replica."""
        for proc in self.running:
            if proc.alive():
                proc.process.send_signal(signal.SIGTERM)
        # One SIGTERM each: a second one during shutdown would kill a service before it finished.
        return {proc.name: self._reap(proc, timeout) for proc in list(self.running)}
