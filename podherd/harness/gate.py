"""The admission gate as deploy/ runs it, for a kubesim (the tests', the benchmark's, the demo's): `podherd
run gate` as its own ServiceAccount with a serving certificate of a CA of its own, reached through the
podherd-gate Service, behind the webhook configuration deploy/ ships with that CA as its caBundle."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kubesim.sim import SimHandle
from podherd.credentials import gate_webhook_configurations
from podherd.harness.processes import ServiceProcess, ServiceProcesses, webhook_port
from podherd.install import install, service_kubeconfig
from shared.access.authority import Authority
from shared.config.model import KubernetesConfig
from shared.kube.client import KubeClient


@dataclass
class Gate:
    processes: ServiceProcesses
    replicas: list[ServiceProcess]
    ca: bytes

    def serve(self, sim: SimHandle) -> None:
        """The podherd-gate Service, as kubesim reaches it: the replicas alive now. The real engine calls the
        first replica's address (`url:` webhooks): its Services' addresses lead nowhere on this machine."""
        if sim.sim is None:
            return
        addresses = [f"127.0.0.1:{webhook_port(r.log)}" for r in self.replicas if r.alive()]
        sim.sim.options.services["podherd/podherd-gate:443"] = addresses

    def kill(self, count: int | None = None) -> None:
        """SIGKILL to `count` replicas alive (all by default; a node lost, the OOM killer), mid-answer if one
        is answering. Their addresses stay in the Service, refusing connections, until `serve`."""
        for replica in [r for r in self.replicas if r.alive()][:count]:
            self.processes.kill(replica)

    def replace(self, sim: SimHandle, count: int) -> None:
        """`count` new replicas, as the Deployment makes them, in the Service once they are Ready."""
        for _ in range(count):
            self.replicas.append(self.processes.start("gate", str(len(self.replicas))))
        self.processes.wait_ready(30)
        self.serve(sim)


CONFIGURATIONS = "/apis/admissionregistration.k8s.io/v1/"


def webhook_configuration(
    ca: bytes, url: str | None = None, kind: str = "ValidatingWebhookConfiguration"
) -> dict[str, Any]:
    """deploy/'s webhooks of `kind` trusting `ca`; with `url`, called there (the path kept) instead of the
    Service."""
    document = gate_webhook_configurations()[kind]
    for hook in document["webhooks"]:
        client = hook["clientConfig"]
        client["caBundle"] = base64.b64encode(ca).decode()
        if url is not None:
            client["url"] = url + (client.pop("service").get("path") or "")
    return document


def register_webhooks(admin: KubeClient, ca: bytes, url: str | None = None) -> None:
    for kind in gate_webhook_configurations():
        path = CONFIGURATIONS + kind.lower() + "s"
        admin.request("POST", path, body=webhook_configuration(ca, url, kind))


def remove_webhooks(admin: KubeClient) -> None:
    for kind in gate_webhook_configurations():
        admin.request("DELETE", CONFIGURATIONS + kind.lower() + "s/podherd-gate")


def start_gate(
    sim: SimHandle,
    workdir: Path,
    *,
    replicas: int = 1,
    arguments: dict[str, Any] | None = None,
    **gate: Any,
) -> Gate:
    """The gate's replicas started and Ready, and its webhooks registered. `gate`: its configuration;
    `arguments`: the migration controller's (the pipeline's), which it judges a pod's eviction by."""
    admin = KubeClient.from_config(KubernetesConfig(kubeconfig=str(sim.kubeconfig)))
    try:
        install(admin, rbac=True)
        kubeconfig = service_kubeconfig(admin, sim.kubeconfig, "gate", path=workdir / "gate.kubeconfig")
        gate.setdefault("clientCA", str(_callers_ca(sim, workdir)))
        started = _start(sim, workdir, kubeconfig, replicas=replicas, gate=gate, arguments=arguments or {})
        url = None if sim.sim is not None else f"https://127.0.0.1:{webhook_port(started.replicas[0].log)}"
        register_webhooks(admin, started.ca, url)
    finally:
        admin.close()
    return started


def _callers_ca(sim: SimHandle, workdir: Path) -> Path:
    """The CA of the client certificate the engine presents to webhooks, as the security guide has users
    configure kube-apiserver: the real engine is started so; kubesim is given one of its CA here."""
    if sim.sim is not None:
        sim.sim.options.webhook_client = sim.sim.tls.client_cert("kube-apiserver")
    path = workdir / "api-server-ca.crt"
    path.write_bytes(sim.ca_pem)
    return path


def _start(
    sim: SimHandle,
    workdir: Path,
    kubeconfig: Path,
    *,
    replicas: int,
    gate: dict[str, Any],
    arguments: dict[str, Any],
) -> Gate:
    authority = Authority.new("podherd-gate-ca")
    cert, key = authority.leaf("podherd-gate", names=("podherd-gate.podherd.svc",), ips=("127.0.0.1",))
    (workdir / "gate.crt").write_bytes(cert)
    (workdir / "gate.key").write_bytes(key)
    config = workdir / "gate.yaml"
    document = {
        "kubernetes": {"kubeconfig": str(kubeconfig)},
        "gate": {"cert": str(workdir / "gate.crt"), "key": str(workdir / "gate.key"), **gate},
        "migrationController": arguments,
        "logging": {"format": "text"},
    }
    config.write_text(yaml.safe_dump(document))
    processes = ServiceProcesses(config=config, workdir=workdir / "gate")
    started = Gate(processes, [processes.start("gate", str(i)) for i in range(replicas)], authority.pem)
    processes.wait_ready(30)
    started.serve(sim)
    return started
