"""A real control plane on this machine: etcd, kube-apiserver, kube-controller-manager, koord-scheduler and
kwok as child processes, each with its own log, started in order and each waited for by what shows it
works; stopped in the reverse order."""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kubesim.sim import SimHandle, write_kubeconfig
from podherd.harness.servers import free_port, spawn_logged
from podherd.realcluster import components, pki
from podherd.realcluster.components import Layout, Ports

START_TIMEOUT = 120.0


class ControlPlaneFailed(RuntimeError):
    """A component exited or never became ready; the message ends with its last log lines."""


@dataclass
class _Component:
    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 15) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


@dataclass
class ControlPlane:
    built: Path  # make controlplane's directory (bin/, crds/, kwok-stages/)
    work: Path | None = None  # this control plane's files; a temporary directory by default
    apiserver_args: tuple[str, ...] = ()  # more of kube-apiserver's flags (e.g. --min-request-timeout)
    components: list[_Component] = field(default_factory=list)
    started_in: float = 0.0

    def __post_init__(self) -> None:
        self._owned = self.work is None
        self.work = self.work or Path(tempfile.mkdtemp(prefix="podherd-controlplane-"))
        self.layout = Layout(self.work, self.built)
        self.ports = Ports(*(free_port() for _ in range(7)))
        self.url = f"https://127.0.0.1:{self.ports.apiserver}"

    def start(self, timeout: float = START_TIMEOUT) -> SimHandle:
        """Everything up and working; a handle whose kubeconfig is the administrator's."""
        began = time.monotonic()
        deadline = began + timeout
        try:
            credentials = pki.issue(self.layout.work)
            self.ca_pem = credentials.ca_pem
            self._token = credentials.tokens["admin"]
            self._context = ssl.create_default_context(cadata=self.ca_pem.decode())
            for component in pki.IDENTITIES:
                self._kubeconfig(component, credentials.tokens[component])
            self._configure()
            self._spawn("etcd", components.etcd(self.layout, self.ports))
            self._until("etcd", self._etcd_healthy, deadline)
            self._spawn(
                "kube-apiserver", [*components.apiserver(self.layout, self.ports), *self.apiserver_args]
            )
            self._until("kube-apiserver", self._apiserver_ready, deadline)
            self._install_crds(deadline)
            self._spawn("kube-controller-manager", components.controller_manager(self.layout, self.ports))
            self._spawn("koord-scheduler", components.scheduler(self.layout, self.ports))
            self._spawn("kwok", components.kwok(self.layout, self.ports))
            self._until("koord-scheduler", lambda: self._healthz(self.ports.scheduler), deadline)
            self._until("kube-controller-manager", self._default_account, deadline)
        except BaseException:
            self.stop()
            raise
        self.started_in = time.monotonic() - began
        handle = SimHandle(
            url=self.url,
            kubeconfig=self.layout.kubeconfig("admin"),
            engine="real",
            started_in=self.started_in,
            cpu_probe=self.cpu_seconds,
        )
        handle._cleanup.append(self.stop)
        return handle

    def stop(self) -> None:
        for component in reversed(self.components):
            if component.process.poll() is None:
                component.process.terminate()
        for component in reversed(self.components):
            try:
                component.process.wait(15)
            except subprocess.TimeoutExpired:
                component.process.kill()
                component.process.wait(10)
        self.components.clear()
        if self._owned and self.work is not None:
            shutil.rmtree(self.work, ignore_errors=True)

    def cpu_seconds(self) -> float:
        """The CPU every component has used so far (user and system, from /proc)."""
        ticks = 0
        for component in self.components:
            try:
                stat = Path(f"/proc/{component.process.pid}/stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[-1].split()
            ticks += int(fields[11]) + int(fields[12])
        return ticks / os.sysconf("SC_CLK_TCK")

    def log(self, name: str) -> Path:
        return self.layout.file(f"{name}.log")

    # -----------------------------------------------------------------------------------------------------

    def _kubeconfig(self, component: str, token: str) -> None:
        write_kubeconfig(
            self.url, self.layout.kubeconfig(component), token, ca_pem=self.ca_pem, name="podherd-real"
        )

    def _configure(self) -> None:
        scheduler = components.scheduler_config(self.layout.kubeconfig("koord-scheduler"))
        self.layout.file("koord-scheduler.yaml").write_text(yaml.safe_dump(scheduler))
        self.layout.file("audit-policy.yaml").write_text(yaml.safe_dump(components.audit_policy()))
        admission, webhook_client = components.admission_config(self.layout)
        self.layout.file("admission.yaml").write_text(yaml.safe_dump(admission))
        self.layout.file("webhook-client.kubeconfig").write_text(yaml.safe_dump(webhook_client))
        stages = [path.read_text().strip() for path in self.layout.kwok_stages]
        if not stages:
            raise ControlPlaneFailed(f"no kwok stages in {self.built}/kwok-stages: run `make controlplane`")
        stages.append(yaml.safe_dump(components.graceful_delete_stage()))
        self.layout.file("kwok.yaml").write_text("\n---\n".join(stages) + "\n")

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = self.log(name)
        self.components.append(_Component(name, spawn_logged(argv, log, cwd=self.layout.work), log))

    def _until(self, name: str, ready: Callable[[], bool], deadline: float) -> None:
        while True:
            for component in self.components:
                if component.process.poll() is not None:
                    raise ControlPlaneFailed(
                        f"{component.name} exited with {component.process.returncode} while starting:\n"
                        f"{component.tail()}"
                    )
            if ready():
                return
            if time.monotonic() > deadline:
                failed = next((c for c in self.components if c.name == name), None)
                detail = failed.tail() if failed else ""
                raise ControlPlaneFailed(f"{name} not ready within the start timeout:\n{detail}")
            time.sleep(0.1)

    def _etcd_healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ports.etcd}/health", timeout=2) as answer:
                return bool(json.loads(answer.read()).get("health") == "true")
        except (OSError, ValueError):
            return False

    def _admin(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self._token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=10, context=self._context) as answer:
                data = answer.read()
                is_json = answer.headers.get_content_type() == "application/json"
                return answer.status, json.loads(data) if is_json else data.decode(errors="replace")
        except urllib.error.HTTPError as error:
            return error.code, None

    def _apiserver_ready(self) -> bool:
        try:
            return self._admin("GET", "/readyz")[0] == 200
        except OSError:
            return False

    def _install_crds(self, deadline: float) -> None:
        names: list[str] = []
        for path in self.layout.crds:
            crd = yaml.safe_load(path.read_text())
            status, _ = self._admin("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
            if status not in (201, 409):
                raise ControlPlaneFailed(f"installing {path.name}: the API server answered {status}")
            names.append(crd["metadata"]["name"])
        self._until("kube-apiserver", lambda: all(self._established(name) for name in names), deadline)

    def _established(self, name: str) -> bool:
        status, crd = self._admin("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
        conditions = ((crd or {}).get("status") or {}).get("conditions") or []
        return status == 200 and any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

    def _healthz(self, port: int) -> bool:
        # A component's own serving certificate, self-signed at start: nothing to verify it against.
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        try:
            with urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", timeout=2, context=context) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    def _default_account(self) -> bool:
        """kube-controller-manager's ServiceAccount controller at work: pods can be made in `default`."""
        return self._admin("GET", "/api/v1/namespaces/default/serviceaccounts/default")[0] == 200
