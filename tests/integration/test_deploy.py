"""`deploy/`: the kustomization applies to a cluster with the real kubectl, the ClusterRoles are enforced
(kubesim's RBAC for ServiceAccount tokens), and the NATS accounts example confines intent publishers and audit
readers to their subjects on a real nats-server."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import nats
import nats.errors
import pytest
from nats.aio.client import Client as NATS

from kubesim import SERVICE_MONITOR_CRD
from kubesim.sim import SimHandle
from podherd.install import DEPLOY, install, service_token
from podherd.servers import find_nats_binary, free_port
from shared.config import KubernetesConfig
from shared.kube import KubeClient, KubeError
from tests.integration.test_kubesim_kubectl import KUBECTL, kubectl

pytestmark = pytest.mark.integration


@pytest.mark.kubectl
@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH")
def test_kubectl_applies_the_kustomization(kubesim_factory: Callable[..., SimHandle]) -> None:
    sim = kubesim_factory()
    kubectl(sim, "apply", "-f", str(SERVICE_MONITOR_CRD))  # the Prometheus Operator's, on a real cluster
    applied = kubectl(sim, "apply", "-k", str(DEPLOY))
    assert applied.count(" created") == 31, applied
    dry = kubectl(sim, "apply", "--dry-run=server", "-k", str(DEPLOY))
    assert dry.count("unchanged") + dry.count("configured") == 31, dry
    deployments = json.loads(kubectl(sim, "get", "deploy", "-n", "podherd", "-o", "json"))["items"]
    assert {d["metadata"]["name"] for d in deployments} == {
        f"podherd-{s}" for s in ("watcher", "arbitrator", "executor", "tracker")
    }
    for d in deployments:
        pod = d["spec"]["template"]["spec"]
        assert d["spec"]["replicas"] >= 2
        assert pod["serviceAccountName"] == d["metadata"]["name"]
        assert pod["containers"][0]["args"][:2] == ["run", d["metadata"]["name"].removeprefix("podherd-")]
        assert pod["containers"][0]["image"] == "ghcr.io/podherd/podherd:0.1.0"
    pdbs = json.loads(kubectl(sim, "get", "pdb", "-n", "podherd", "-o", "json"))["items"]
    assert len(pdbs) == 4
    assert "podherd" in kubectl(sim, "get", "servicemonitors", "-n", "podherd", "-o", "name")
    config = json.loads(kubectl(sim, "get", "configmap", "-n", "podherd", "-o", "json"))["items"]
    assert any("config.yaml" in (c.get("data") or {}) for c in config)


def as_service(sim: SimHandle, admin: KubeClient, tmp_path: Path, service: str) -> KubeClient:
    path = sim.kubeconfig_for(tmp_path / service, service_token(admin, service))
    return KubeClient.from_config(KubernetesConfig(kubeconfig=str(path)))


def status_of(kube: KubeClient, method: str, path: str, body: object = None) -> int:
    try:
        kube.request(method, path, body=body)
    except KubeError as exc:
        return exc.status
    return 200


@pytest.mark.denials_expected
def test_each_service_may_do_only_what_its_cluster_role_grants(
    kubesim_factory: Callable[..., SimHandle], tmp_path: Path
) -> None:
    sim = kubesim_factory("fragmented")
    admin = KubeClient.from_config(KubernetesConfig(kubeconfig=str(sim.kubeconfig)))
    install(admin, rbac=True)
    executor, watcher, arbitrator = (
        as_service(sim, admin, tmp_path, s) for s in ("executor", "watcher", "arbitrator")
    )
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "missing"}}
    try:
        assert status_of(executor, "GET", "/api/v1/namespaces/default/pods/missing") == 404  # allowed
        assert (
            status_of(executor, "POST", "/api/v1/namespaces/default/pods/missing/eviction", eviction) == 404
        )
        assert status_of(watcher, "GET", "/api/v1/nodes") == 200
        assert (
            status_of(arbitrator, "GET", "/apis/scheduling.koordinator.sh/v1alpha1/podmigrationjobs") == 200
        )
        with pytest.raises(KubeError) as denied:
            executor.request("GET", "/api/v1/nodes")
        assert denied.value.status == 403
        assert 'User "system:serviceaccount:podherd:podherd-executor" cannot list resource "nodes"' in str(
            denied.value
        )
        assert status_of(watcher, "DELETE", "/api/v1/namespaces/default/pods/big") == 403
        assert status_of(arbitrator, "POST", "/api/v1/namespaces/default/pods/big/eviction", eviction) == 403
        assert status_of(admin, "GET", "/api/v1/nodes") == 200  # kubesim's own kubeconfig: the administrator
        assert sim.sim is not None and sim.sim.authorizer is not None
        assert len(sim.sim.authorizer.denials) == 3
    finally:
        for kube in (executor, watcher, arbitrator, admin):
            kube.close()


@pytest.fixture
def accounts_server(tmp_path: Path) -> object:
    binary = find_nats_binary()
    if binary is None:
        pytest.skip("no nats-server binary")
    port = free_port()
    conf = tmp_path / "server.conf"
    conf.write_text(f"port: {port}\nhost: 127.0.0.1\njetstream: {{store_dir: '{tmp_path}'}}\n")
    conf.write_text(conf.read_text() + (DEPLOY / "nats" / "accounts.conf").read_text())
    check = subprocess.run([binary, "-t", "-c", str(conf)], capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stderr
    process = subprocess.Popen(
        [binary, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    yield f"127.0.0.1:{port}"
    process.terminate()
    process.wait(10)


class Errors(list[str]):
    """Errors the server sent, and a way to wait for them (they arrive after the call that caused them)."""

    def __init__(self) -> None:
        super().__init__()
        self.arrived = asyncio.Event()

    async def until(self, count: int, within: float = 30.0) -> list[str]:
        async with asyncio.timeout(within):
            while len(self.violations()) < count:
                self.arrived.clear()
                await self.arrived.wait()
        return self.violations()

    def violations(self) -> list[str]:
        return [e for e in self if "permissions violation" in e.lower()]


async def connect_as(address: str, user: str, password: str, errors: Errors) -> NATS:
    async def on_error(exc: Exception) -> None:
        errors.append(str(exc))
        errors.arrived.set()

    for _ in range(50):
        try:
            return await nats.connect(f"nats://{user}:{password}@{address}", error_cb=on_error)
        except (nats.errors.NoServersError, OSError):
            await asyncio.sleep(0.1)  # the server is still starting
    raise AssertionError("nats-server did not start")


async def test_nats_accounts_confine_publishers_and_auditors(accounts_server: str) -> None:
    errors = Errors()
    publisher = await connect_as(accounts_server, "intent-publisher", "change-me-publisher", errors)
    auditor = await connect_as(accounts_server, "audit-reader", "change-me-auditor", errors)
    services = await connect_as(accounts_server, "podherd", "change-me-services", errors)
    try:
        got = await services.subscribe("podherd.>")
        await services.flush()  # the subscription is on the server before anything is published
        await publisher.publish("podherd.intents.default", b"{}")  # allowed
        await publisher.publish("podherd.jobs.admitted.x", b"{}")  # not an intent: refused
        await auditor.publish("podherd.intents.default", b"{}")  # auditors publish nothing
        await publisher.flush()
        await auditor.flush()
        msg = await got.next_msg(timeout=30)  # a bound for failing only: it arrives at once when quiet
        assert msg.subject == "podherd.intents.default"
        with pytest.raises(nats.errors.TimeoutError):
            await got.next_msg(timeout=0.5)  # neither refused message arrived
        await auditor.subscribe("podherd.jobs.>")  # not audit: refused
        await auditor.subscribe("podherd.audit.>")  # allowed
        await auditor.flush()
        violations = await errors.until(3)
        assert len(violations) == 3, errors
        assert any("podherd.jobs.admitted.x" in e for e in violations)
        assert any('subscription to "podherd.jobs.>"' in e.lower() for e in violations)
    finally:
        for nc in (publisher, auditor, services):
            await nc.close()
