"""Podherd's own deployment, run for real: `kubectl apply -k deploy/` on kubesim starts the four services
from their manifests (kubesim's kubelet runs Podherd's image as processes), each under its own
ServiceAccount and ClusterRole, against a three-node JetStream cluster and Redis reached by the Service
names in deploy/config.yaml; a PodMigrationJob created with kubectl then succeeds."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kubesim.options import PODHERD_IMAGE, podherd_image
from kubesim.scenario import fragmented
from kubesim.sim import SimHandle
from shared.servers import NatsCluster, Server, find_nats_binary, redis_server, start_nats_cluster
from tests.integration.test_deploy import DEPLOY, SERVICE_MONITOR_CRD
from tests.integration.test_kubesim_kubectl import KUBECTL, kubectl
from tests.kube import client_for, watch_until

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.kubectl,
    pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH"),
    pytest.mark.skipif(os.geteuid() != 0, reason="pods run as processes in their own namespaces: needs root"),
]
SERVICES = ("watcher", "arbitrator", "executor", "tracker")


@pytest.fixture
def nats_cluster(tmp_path: Path) -> Iterator[NatsCluster]:
    binary = find_nats_binary()
    if binary is None:
        pytest.skip("no nats-server binary")
    cluster = start_nats_cluster(binary, 3, tmp_path / "nats", max_file_store=8 << 30)
    yield cluster
    cluster.stop()


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[Server]:
    """A Redis of its own: deploy/config.yaml uses Podherd's default key prefix."""
    server = redis_server(tmp_path / "redis", env={})
    yield server
    server.stop()


def test_kubectl_apply_runs_podherd_and_a_job_succeeds(
    kubesim_factory: Callable[..., SimHandle], nats_cluster: NatsCluster, redis: Server
) -> None:
    services = {
        "podherd/nats:4222": [s.url.removeprefix("nats://") for s in nats_cluster.servers],
        "podherd/redis:6379": [f"{redis.host}:{redis.port}"],
    }
    sim = kubesim_factory(fragmented(2), images={PODHERD_IMAGE: podherd_image()}, services=services)
    kubectl(sim, "apply", "-f", str(SERVICE_MONITOR_CRD))  # the Prometheus Operator's, on a real cluster
    kubectl(sim, "apply", "-k", str(DEPLOY))
    kube = client_for(sim)

    def all_ready(state: dict[str, object]) -> bool:
        deployments = [d for d in state.values() if d.metadata.name.startswith("podherd-")]  # type: ignore[attr-defined]
        return len(deployments) == 4 and all(
            (d.status.ready_replicas or 0) == d.spec.replicas  # type: ignore[attr-defined]
            for d in deployments
        )

    watch_until(kube.apps.list_namespaced_deployment, all_ready, 90, idle=True, namespace="podherd")
    pods = kube.core.list_namespaced_pod("podherd").items
    assert len(pods) == 10 and all(p.status.pod_ip.startswith("127.244.") for p in pods)
    assert all(p.status.container_statuses[0].restart_count == 0 for p in pods)

    web = kube.core.list_namespaced_pod("default", label_selector="app=web").items[0]
    job = f"""apiVersion: scheduling.koordinator.sh/v1alpha1
kind: PodMigrationJob
metadata:
  name: move-web
spec:
  podRef:
    namespace: default
    name: {web.metadata.name}
"""
    created = subprocess.run(
        [KUBECTL or "kubectl", "--kubeconfig", str(sim.kubeconfig), "create", "-f", "-"],
        input=job, capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    assert created.stdout.strip() == "podmigrationjob.scheduling.koordinator.sh/move-web created"
    waited = kubectl(
        sim, "wait", "--for=jsonpath={.status.phase}=Succeeded", "podmigrationjob/move-web", "--timeout=90s"
    )
    assert "condition met" in waited
    moved = kubectl(sim, "get", "podmigrationjob", "move-web", "-o", "jsonpath={.status.podRef.name}")
    assert moved and moved != web.metadata.name

    # Each service ran under its own token: the authorizer saw each account, and denied none of them
    # (kubesim_factory fails the test on any denial of Podherd's accounts).
    assert sim.sim is not None
    users = {user for user, *_ in sim.sim.authorizer.used}
    assert {f"system:serviceaccount:podherd:podherd-{s}" for s in SERVICES} <= users

    # A deleted replica gets SIGTERM and ends on its own within its 45 s grace; its replacement starts.
    victim = kube.core.list_namespaced_pod(
        "podherd", label_selector="app.kubernetes.io/component=executor"
    ).items[0]
    kubectl(sim, "delete", "pod", "-n", "podherd", victim.metadata.name, "--timeout=40s")
    watch_until(kube.apps.list_namespaced_deployment, all_ready, 60, idle=True, namespace="podherd")
