"""`deploy/`: the kustomization applies to a cluster with the real kubectl, the ClusterRoles are enforced
(kubesim's RBAC for ServiceAccount tokens), and the shipped NATS accounts confine senders of intents and audit
readers to their subjects on a real nats-server with TLS."""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import nats
import nats.errors
import pytest
import yaml

from kubesim import SERVICE_MONITOR_CRD
from kubesim.sim import SimHandle
from podherd import nats_pki
from podherd.certs import make
from podherd.credentials import GATE_PATCH_FILES
from podherd.harness.servers import Server, find_nats_binary, start_nats_binary
from podherd.install import DEPLOY, install, service_token
from podherd.nats_pki import Pki
from shared.config.model import KubernetesConfig, NatsConfig
from shared.kube.client import KubeClient, KubeError
from shared.nats import bus
from shared.nats.access import Access
from shared.nats.permissions import accounts_file
from tests.kubesim.test_kubectl import KUBECTL, kubectl

pytestmark = pytest.mark.integration


@pytest.mark.kubectl
@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH")
def test_kubectl_applies_the_kustomization(kubesim_factory: Callable[..., SimHandle]) -> None:
    sim = kubesim_factory()  # no Prometheus Operator: deploy/ asks for none
    applied = kubectl(sim, "apply", "-k", str(DEPLOY))
    assert applied.count(" created") == 46, applied
    for kind in ("validating", "mutating"):
        assert f"{kind}webhookconfiguration.admissionregistration.k8s.io/podherd-gate created" in applied
    dry = kubectl(sim, "apply", "--dry-run=server", "-k", str(DEPLOY))
    assert dry.count("unchanged") + dry.count("configured") == 46, dry
    deployments = json.loads(kubectl(sim, "get", "deploy", "-n", "podherd", "-o", "json"))["items"]
    assert {d["metadata"]["name"] for d in deployments} == {
        f"podherd-{s}" for s in ("watcher", "arbitrator", "executor", "tracker", "gate", "planner")
    }
    for d in deployments:
        pod = d["spec"]["template"]["spec"]
        service = d["metadata"]["name"].removeprefix("podherd-")
        env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
        secrets = {v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
        # its NATS certificate: its NATS user (the gate's: its serving certificate, and no NATS user)
        assert f"podherd-{service}-nats" in secrets or (service, secrets) == ("gate", {"podherd-gate-tls"})
        if service in ("arbitrator", "tracker"):  # its own Redis user, its password from its Secret
            assert env["PODHERD_REDIS__USERNAME"] == f"podherd-{service}"
            assert f"podherd-{service}-redis" in secrets
        assert d["spec"]["replicas"] >= 2 or (service, d["spec"]["replicas"]) == (
            "planner",
            0,
        )  # off by default
        assert pod["serviceAccountName"] == d["metadata"]["name"]
        assert pod["containers"][0]["args"][:2] == ["run", d["metadata"]["name"].removeprefix("podherd-")]
        assert pod["containers"][0]["image"] == "ghcr.io/podherd/podherd:0.1.0"
    pdbs = json.loads(kubectl(sim, "get", "pdb", "-n", "podherd", "-o", "json"))["items"]
    assert len(pdbs) == 5
    config = json.loads(kubectl(sim, "get", "configmap", "-n", "podherd", "-o", "json"))["items"]
    assert any("config.yaml" in (c.get("data") or {}) for c in config)


# What the evictions guide has an overlay add when the gate's certificate comes from `podherd certs`.
GATE_CA_PATCHES = [
    {"path": f"certs/{file}", "target": {"kind": kind, "name": "podherd-gate"}}
    for kind, file in GATE_PATCH_FILES.items()
]


def image_overlay() -> str:
    """The overlay docs/operating/image.md tells users to write, as written there."""
    text = (DEPLOY.parent / "docs" / "operating" / "image.md").read_text()
    return text.split("# my-cluster/kustomization.yaml\n", 1)[1].split("```", 1)[0]


@pytest.mark.kubectl
@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH")
def test_an_overlay_as_the_docs_write_it_names_the_image_and_takes_the_optional_components(
    kubesim_factory: Callable[..., SimHandle], tmp_path: Path
) -> None:
    sim = kubesim_factory()
    (tmp_path / "deploy").symlink_to(DEPLOY)
    mine = tmp_path / "my-cluster"
    mine.mkdir()
    (mine / "kustomization.yaml").write_text(image_overlay())
    plain = [d for d in yaml.safe_load_all(kubectl(sim, "kustomize", str(mine))) if d]
    images = {
        c["image"]
        for d in plain
        if d["kind"] == "Deployment"
        for c in d["spec"]["template"]["spec"]["containers"]
    }
    assert images == {"registry.example.com/platform/podherd:0.1.0"}
    assert {d["kind"] for d in plain} >= {"CustomResourceDefinition", "Deployment"}
    assert "ServiceMonitor" not in {d["kind"] for d in plain}

    components = ["../deploy/components/beside-koordinator", "../deploy/components/monitoring"]
    make("podherd", ("gate",), keep=str(mine / "certs"))  # without cert-manager: its CA, as patches
    overlay = {**yaml.safe_load(image_overlay()), "components": components, "patches": GATE_CA_PATCHES}
    (mine / "kustomization.yaml").write_text(yaml.safe_dump(overlay))
    kubectl(sim, "apply", "-k", str(DEPLOY / "crds"))  # as Koordinator's chart installs them
    kubectl(sim, "apply", "-f", str(SERVICE_MONITOR_CRD))  # as the Prometheus Operator does
    applied = kubectl(sim, "apply", "-k", str(mine))
    assert "customresourcedefinition" not in applied, applied
    assert "servicemonitor.monitoring.coreos.com/podherd created" in applied, applied
    assert "podherd" in kubectl(sim, "get", "servicemonitors", "-n", "podherd", "-o", "name")
    bundle = base64.b64encode((mine / "certs" / "ca.crt").read_bytes()).decode()
    for kind in ("validating", "mutating"):
        hooks = json.loads(kubectl(sim, "get", f"{kind}webhookconfiguration", "podherd-gate", "-o", "json"))
        assert {h["clientConfig"].get("caBundle") for h in hooks["webhooks"]} == {bundle}, kind


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


def test_the_shipped_nats_accounts_are_the_generated_ones() -> None:
    shipped = (DEPLOY / "nats" / "accounts.conf").read_text()
    assert shipped == accounts_file(bus.Subjects("podherd")), "run `podherd config --nats-accounts`"


@pytest.fixture
def accounts_server(tmp_path: Path) -> Iterator[tuple[Server, Pki]]:
    """nats-server with the shipped accounts.conf included beside TLS that maps client certificates."""
    binary = find_nats_binary()
    if binary is None:
        pytest.skip("no nats-server binary")
    pki = nats_pki.issue(tmp_path / "pki")
    data = tmp_path / "server"
    data.mkdir()
    shutil.copy(DEPLOY / "nats" / "accounts.conf", data / "accounts.conf")
    server = start_nats_binary(binary, data, conf=pki.tls_conf() + "include accounts.conf\n")
    yield server, pki
    server.stop()


async def test_nats_accounts_confine_senders_and_auditors(accounts_server: tuple[Server, Pki]) -> None:
    server, pki = accounts_server
    errors: list[str] = []
    arrived = asyncio.Event()

    async def on_error(exc: Exception) -> None:
        errors.append(str(exc).lower())
        arrived.set()

    def options(user: str) -> dict[str, Any]:
        tls = Access(NatsConfig(url=server.url, tls=pki.tls(user))).options
        return {"error_cb": on_error, "allow_reconnect": False, **tls}

    sender = await nats.connect(server.url, **options("podherd-intent-sender"))
    auditor = await nats.connect(server.url, **options("podherd-auditor"))
    tracker = await nats.connect(server.url, **options("podherd-tracker"))
    try:
        got = await tracker.subscribe("podherd.intent.request")
        await tracker.flush()  # the subscription is on the server before anything is published
        await sender.publish("podherd.intent.request", b"{}")  # allowed
        await sender.publish("podherd.jobs.evict.x", b"{}")  # an executor command: refused
        await auditor.publish("podherd.intent.request", b"{}")  # auditors publish nothing
        await sender.flush()
        await auditor.flush()
        msg = await got.next_msg(timeout=30)  # a bound for failing only: it arrives at once when quiet
        assert msg.subject == "podherd.intent.request"
        with pytest.raises(nats.errors.TimeoutError):
            await got.next_msg(timeout=0.5)  # neither refused message arrived
        await auditor.subscribe("podherd.jobs.>")  # not audit: refused
        await auditor.subscribe("podherd.audit.>")  # allowed
        await auditor.flush()
        async with asyncio.timeout(30):
            while len(errors) < 3:
                arrived.clear()
                await arrived.wait()
        assert len(errors) == 3, errors
        assert any('publish to "podherd.jobs.evict.x"' in e for e in errors)
        assert any('subscription to "podherd.jobs.>"' in e for e in errors)
    finally:
        for nc in (sender, auditor, tracker):
            await nc.close()
