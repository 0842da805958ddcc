"""Podherd's own deployment, run for real: `kubectl apply -k deploy/` on kubesim starts the four services
and the gate from their manifests (kubesim's kubelet runs Podherd's image as processes), each under its own
ServiceAccount and ClusterRole, against a three-node JetStream cluster and Redis reached by the Service
names in deploy/config.yaml; a PodMigrationJob created with kubectl (let in by the gate's webhook, as its
author) then succeeds. This is what `podherd demo --in-cluster` sets up (podherd.demo.cluster)."""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

import pytest

from podherd.demo import cluster as demo_cluster
from podherd.harness.processes import SERVICES
from shared.config.model import KubernetesConfig
from shared.kube.client import KubeClient
from tests.kube import client_for
from tests.kubesim.test_kubectl import KUBECTL

pytestmark = [
    pytest.mark.e2e,
    # `make chaos` runs it (`pytest -m full`): `make test` has the in-cluster demo's run of the same
    # deploy/ (tests/integration/test_demo.py), and no room for both.
    pytest.mark.full,
    pytest.mark.xdist_group("pod-processes"),  # one worker runs every test whose pods are real processes
    pytest.mark.kubectl,
    pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH"),
    pytest.mark.skipif(os.geteuid() != 0, reason="pods run as processes in their own namespaces: needs root"),
]
JOB = """apiVersion: scheduling.koordinator.sh/v1alpha1
kind: PodMigrationJob
metadata:
  name: move-web
spec:
  podRef:
    namespace: default
    name: {pod}
"""


def test_kubectl_apply_runs_podherd_and_a_job_made_with_kubectl_succeeds(tmp_path: Path) -> None:
    with contextlib.ExitStack() as stack:
        cluster = demo_cluster.start(stack, tmp_path)  # kubectl cordon, apply -k deploy/, all Ready, uncordon
        assert cluster.handle.sim is not None
        kube = client_for(cluster.handle)
        pods = kube.core.list_namespaced_pod("podherd").items
        assert len(pods) == 12 and {p.spec.node_name for p in pods} == {demo_cluster.SYSTEM_NODE}
        assert all(p.status.pod_ip.startswith("127.244.") for p in pods)
        assert all(p.status.container_statuses[0].restart_count == 0 for p in pods)

        web = kube.core.list_namespaced_pod("default", label_selector="app=web").items[0].metadata.name
        created = subprocess.run(
            [KUBECTL or "kubectl", "--kubeconfig", str(cluster.handle.kubeconfig), "create", "-f", "-"],
            input=JOB.format(pod=web), capture_output=True, text=True, check=True, timeout=60,
        )  # fmt: skip
        assert created.stdout.strip() == "podmigrationjob.scheduling.koordinator.sh/move-web created"
        waited = cluster.run_kubectl(
            "wait", "--for=jsonpath={.status.phase}=Succeeded", "podmigrationjob/move-web", "--timeout=90s"
        )
        assert "condition met" in waited
        moved = cluster.run_kubectl("get", "pmj", "move-web", "-o", "jsonpath={.status.podRef.name}")
        assert moved and moved != web

        # Each service ran under its own projected token, and RBAC denied none of them anything.
        authorizer = cluster.handle.sim.authorizer
        users = {user for user, *_ in authorizer.used}
        assert {f"system:serviceaccount:podherd:podherd-{s}" for s in (*SERVICES, "gate")} <= users
        assert not [d for d in authorizer.denials if d.user.startswith("system:serviceaccount:podherd:")]

        # A deleted replica gets SIGTERM and ends on its own within its grace; its replacement starts.
        admin = KubeClient.from_config(KubernetesConfig(kubeconfig=str(cluster.handle.kubeconfig)))
        stack.callback(admin.close)
        victim = next(p.metadata.name for p in pods if "executor" in p.metadata.name)
        cluster.run_kubectl("delete", "pod", "-n", "podherd", victim, "--timeout=40s")
        demo_cluster.wait_ready(admin, 60)
        assert demo_cluster.exit_codes(cluster)[f"{victim}/executor"] == 0

        # Deleting the Deployments stops every pod the same way.
        codes = demo_cluster.stop(cluster, admin, 60)
        assert len(codes) == 13 and set(codes.values()) == {0}, codes
        assert kube.core.list_namespaced_pod("podherd").items == []
