"""The admission gate run outside a cluster, beside `podherd sim`, exactly as the evictions guide tells it:
the simulator writes each service's kubeconfig (the gate's too) and the CA its webhook calls are signed by,
`podherd certs --dir` writes the gate's certificate files and the caBundle patches, kubectl applies deploy/'s
webhook configuration and patches it, and `--service` maps the webhook's Service to the gate's port. An
eviction of an opted-in pod then becomes its job."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from kubesim.sim import SimHandle, start_subprocess
from podherd.harness.processes import ServiceProcesses
from podherd.harness.servers import free_port
from podherd.install import DEPLOY
from services.gate.evacuation import OPT_IN, TRIGGERED, job_name
from tests.e2e.test_gate import evict, get_job, namespace, stateful_set
from tests.kube import Kube, client_for, watch_until
from tests.kubesim.test_kubectl import KUBECTL

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.integration,
    pytest.mark.kubectl,
    pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH"),
]


def run(*argv: str, stdout: int | None = subprocess.PIPE) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=60, check=True)


@pytest.fixture
def outside(tmp_path: Path) -> Iterator[tuple[SimHandle, Path, int]]:
    accounts, port = tmp_path / "accounts", free_port()
    service = f"podherd/podherd-gate:443=127.0.0.1:{port}"
    handle = start_subprocess(extra_args=["--podherd-accounts", str(accounts), "--service", service])
    try:
        yield handle, accounts, port
    finally:
        handle.stop()


def test_the_gate_beside_podherd_sim_as_the_guide_runs_it(
    outside: tuple[SimHandle, Path, int], tmp_path: Path
) -> None:
    handle, accounts, port = outside
    kubectl = [KUBECTL or "kubectl", "--kubeconfig", str(handle.kubeconfig)]
    certs = tmp_path / "certs"
    run(sys.executable, "-m", "podherd", "certs", "--dir", str(certs), stdout=subprocess.DEVNULL)
    run(*kubectl, "apply", "-f", str(DEPLOY / "base" / "gate-webhooks.yaml"))
    for kind, patch in (
        ("validatingwebhookconfiguration", "gate-webhooks-patch.json"),
        ("mutatingwebhookconfiguration", "gate-mutating-webhooks-patch.json"),
    ):
        run(*kubectl, "patch", kind, "podherd-gate", "--type=json", "--patch-file", str(certs / patch))
    config = tmp_path / "gate.yaml"
    gate = {
        "port": port,
        "cert": str(certs / "gate" / "tls.crt"),
        "key": str(certs / "gate" / "tls.key"),
        "clientCA": str(accounts / "api-server-ca.crt"),
    }
    document = {"kubernetes": {"kubeconfig": str(accounts / "kubeconfig-gate")}, "gate": gate}
    config.write_text(yaml.safe_dump({**document, "http": {"port": 0}}))

    kube = client_for(handle)
    namespace(kube, "shop", {OPT_IN: "true"})
    stateful_set(kube, "shop", "web", 2)
    watch_until(kube.core.list_namespaced_pod, lambda pods: "shop/web-0" in pods, namespace="shop")
    # The port the config names (the harness gives each replica a free one unless told).
    processes = ServiceProcesses(
        config=config, workdir=tmp_path / "gate-run", env={"PODHERD_GATE__PORT": str(port)}
    )
    processes.start("gate")
    try:
        processes.wait_ready(30)
        assert_becomes_a_job(kube)
    finally:
        processes.stop_all()


def assert_becomes_a_job(kube: Kube) -> None:
    uid = kube.core.read_namespaced_pod("web-0", "shop").metadata.uid
    code, message = evict(kube, "shop", "web-0")
    assert code == 429 and TRIGGERED in message, message
    job = get_job(kube, job_name(uid))
    assert job is not None and job["spec"]["podRef"]["name"] == "web-0", job
