"""The real kubectl against kubesim through an ordinary kubeconfig."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from kubesim.sim import SimHandle
from tests.kube import client_for, pod_ready, watch_until

KUBECTL = shutil.which("kubectl")
pytestmark = [
    pytest.mark.integration,
    pytest.mark.kubectl,
    pytest.mark.skipif(
        KUBECTL is None, reason="kubectl is not on PATH: install kubectl (v1.32) to run these tests"
    ),
]
CRDS = Path(__file__).resolve().parents[2] / "deploy" / "crds"


def kubectl(
    handle: SimHandle, *args: str, timeout: float = 60, check: bool = True, stderr: bool = False
) -> str:
    """kubectl's standard output (and its standard error after it, with `stderr`)."""
    assert KUBECTL is not None
    result = subprocess.run(
        [KUBECTL, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, "KUBECONFIG": str(handle.kubeconfig), "HOME": str(handle.kubeconfig.parent)},
    )
    if check and result.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed ({result.returncode}): {result.stderr}")
    return result.stdout + result.stderr if stderr else result.stdout


@pytest.fixture
def sim(kubesim_factory: Callable[..., SimHandle]) -> SimHandle:
    handle = kubesim_factory("fragmented")
    kubectl(handle, "apply", "-k", str(CRDS))
    return handle


def test_apply_crds_and_get_pmj(sim: SimHandle, tmp_path: Path) -> None:
    assert "podmigrationjobs.scheduling.koordinator.sh" in kubectl(sim, "get", "crd")
    assert kubectl(sim, "apply", "-k", str(CRDS)).count("unchanged") == 2
    job = tmp_path / "job.yaml"
    job.write_text(
        "apiVersion: scheduling.koordinator.sh/v1alpha1\nkind: PodMigrationJob\nmetadata: {name: move-web}\n"
        "spec: {podRef: {namespace: default, name: web-0}, ttl: 5m}\n"
    )
    assert "podmigrationjob.scheduling.koordinator.sh/move-web created" in kubectl(
        sim, "apply", "-f", str(job)
    )
    table = kubectl(sim, "get", "pmj").splitlines()  # Koordinator's columns; no phase or node yet
    assert table[0].split() == [
        *("NAME", "PHASE", "STATUS", "AGE", "NODE", "RESERVATION", "PODNAMESPACE", "POD", "NEWPOD", "TTL")
    ]
    row = table[1].split()
    assert row[0] == "move-web" and row[2:] == ["default", "web-0", "5m"]


def test_get_pods_wide(sim: SimHandle) -> None:
    lines = kubectl(sim, "get", "pods", "-A", "-o", "wide").splitlines()
    assert lines[0].split()[:8] == ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE"]
    rows = [line.split() for line in lines[1:]]
    assert len(rows) == 13
    running = [r for r in rows if r[3] == "Running"]
    assert len(running) == 12 and all(r[7].startswith("node-") for r in running)
    assert next(r for r in rows if r[1] == "big")[3] == "Pending"


def test_get_pmj_watch(sim: SimHandle, tmp_path: Path) -> None:
    kube = client_for(sim)
    group, version = "scheduling.koordinator.sh", "v1alpha1"
    body = {
        "apiVersion": f"{group}/{version}",
        "kind": "PodMigrationJob",
        "metadata": {"name": "w1"},
        "spec": {"podRef": {"namespace": "default", "name": "web-0"}},
    }
    kube.custom.create_cluster_custom_object(group, version, "podmigrationjobs", body)
    output: list[str] = []

    def watch() -> None:
        output.append(kubectl(sim, "get", "pmj", "-w", "--request-timeout=3s", timeout=20, check=False))

    thread = threading.Thread(target=watch)
    thread.start()
    # The watch must be open before the change; the initial row proves it.
    watch_until(
        kube.custom.list_cluster_custom_object,
        lambda s: "/w1" in s,
        group=group,
        version=version,
        plural="podmigrationjobs",
    )
    thread.join(0.5)
    kube.custom.patch_cluster_custom_object_status(
        group,
        version,
        "podmigrationjobs",
        "w1",
        {"status": {"phase": "Running", "status": "ReservationCreated"}},
    )
    thread.join(20)
    rows = [line.split() for line in output[0].splitlines()]
    assert rows[0][:3] == ["NAME", "PHASE", "STATUS"]
    assert any(r[:3] == ["w1", "Running", "ReservationCreated"] for r in rows[1:])


def test_describe_and_delete_pod(sim: SimHandle) -> None:
    description = kubectl(sim, "describe", "pod", "big")
    assert "Status:" in description and "Pending" in description
    assert "FailedScheduling" in description and "Insufficient cpu" in description
    name = (
        client_for(sim).core.list_namespaced_pod("default", label_selector="app=api").items[0].metadata.name
    )
    assert f'pod "{name}" deleted' in kubectl(sim, "delete", "pod", name)
    assert name not in kubectl(sim, "get", "pods")


def test_drain_evicts_through_the_budget_and_leaves_daemon_pods(sim: SimHandle) -> None:
    kube = client_for(sim)
    template = {"containers": [{"name": "agent", "image": "agent:1"}]}
    kube.apps.create_namespaced_daemon_set(
        "default",
        {
            "metadata": {"name": "agent"},
            "spec": {
                "selector": {"matchLabels": {"app": "agent"}},
                "template": {"metadata": {"labels": {"app": "agent"}}, "spec": template},
            },
        },
    )
    daemon = watch_until(
        kube.core.list_namespaced_pod,
        lambda s: any(p.spec.node_name == "node-6" and pod_ready(p) for p in s.values()),
        namespace="default",
        label_selector="app=agent",
    )
    (agent,) = [key for key, p in daemon.items() if p.spec.node_name == "node-6"]
    refused = kubectl(sim, "drain", "node-6", "--timeout=10s", check=False, stderr=True)
    assert "node/node-6 cordoned" in refused
    assert f"cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore): {agent}" in refused
    out = kubectl(
        sim,
        "drain",
        "node-6",
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        "--timeout=60s",
        timeout=90,
        stderr=True,
    )
    assert "node/node-6 already cordoned" in out and "node/node-6 drained" in out
    assert f"Warning: ignoring DaemonSet-managed Pods: {agent}" in out
    assert "SchedulingDisabled" in kubectl(sim, "get", "node", "node-6")
    on_node = kubectl(sim, "get", "pods", "-A", "--field-selector", "spec.nodeName=node-6", "-o", "name")
    assert on_node.split() == [f"pod/{agent.split('/')[1]}"]


def test_explain_reads_the_crds_schema(sim: SimHandle) -> None:
    out = kubectl(sim, "explain", "podmigrationjob.spec")
    assert out.splitlines()[:3] == [
        "GROUP:      scheduling.koordinator.sh",
        "KIND:       PodMigrationJob",
        "VERSION:    v1alpha1",
    ]
    assert "podRef\t<Object> -required-" in out and "Paused indicates whether the PodMigrationJob" in out


def test_get_events_shows_the_api_servers_columns(sim: SimHandle) -> None:
    kube = client_for(sim)
    kube.core.create_namespaced_pod(
        "default", {"metadata": {"name": "e1"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    )
    watch_until(
        kube.core.list_namespaced_event,
        lambda state: any(e.involved_object.name == "e1" and e.reason == "Scheduled" for e in state.values()),
        namespace="default",
    )
    lines = kubectl(sim, "get", "events", "--field-selector=involvedObject.name=e1").splitlines()
    assert lines[0].split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    scheduled = next(line.split(None, 4) for line in lines[1:] if " Scheduled " in line)
    assert scheduled[1:4] == ["Normal", "Scheduled", "pod/e1"] and scheduled[4].startswith(
        "Successfully assigned default/e1"
    )


def test_rollout_history_and_undo(sim: SimHandle) -> None:
    kube = client_for(sim)
    template = {
        "metadata": {"labels": {"app": "shop"}},
        "spec": {"containers": [{"name": "c", "image": "shop:1"}]},
    }
    body = {
        "metadata": {"name": "shop"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "shop"}}, "template": template},
    }
    kube.apps.create_namespaced_deployment("default", body)

    def revised(revision: str) -> None:
        watch_until(
            kube.apps.list_namespaced_deployment,
            lambda state: (
                (state["default/shop"].metadata.annotations or {}).get("deployment.kubernetes.io/revision")
                == revision
            ),
            namespace="default",
        )

    revised("1")
    kubectl(sim, "set", "image", "deployment/shop", "c=shop:2")
    revised("2")
    history = kubectl(sim, "rollout", "history", "deployment/shop").split()
    assert history[history.index("CHANGE-CAUSE") + 1 :] == ["1", "<none>", "2", "<none>"]
    assert "rolled back" in kubectl(sim, "rollout", "undo", "deployment/shop")
    revised("3")  # the first ReplicaSet again, under a new revision
    history = kubectl(sim, "rollout", "history", "deployment/shop").split()
    assert history[history.index("CHANGE-CAUSE") + 1 :] == ["2", "<none>", "3", "<none>"]
    assert (
        kube.apps.read_namespaced_deployment("shop", "default").spec.template.spec.containers[0].image
        == "shop:1"
    )


def test_kubectl_creates_built_in_objects_in_protobuf(sim: SimHandle) -> None:
    assert kubectl(sim, "create", "namespace", "shop").strip() == "namespace/shop created"
    kubectl(sim, "create", "configmap", "settings", "-n", "shop", "--from-literal=colour=blue")
    kubectl(sim, "create", "deployment", "web", "-n", "shop", "--image=nginx:1", "--replicas=2", "--port=80")
    kubectl(
        sim, "create", "poddisruptionbudget", "web", "-n", "shop", "--selector=app=web", "--min-available=50%"
    )
    kube = client_for(sim)
    assert kube.core.read_namespaced_config_map("settings", "shop").data == {"colour": "blue"}
    deployment = kube.apps.read_namespaced_deployment("web", "shop")
    container = deployment.spec.template.spec.containers[0]
    assert (deployment.spec.replicas, container.image, container.ports[0].container_port) == (
        2,
        "nginx:1",
        80,
    )
    assert deployment.spec.strategy.type == "RollingUpdate"  # defaulted: the empty strategy sent was omitted
    pdb = kube.policy.read_namespaced_pod_disruption_budget("web", "shop")
    assert (pdb.spec.min_available, pdb.spec.selector.match_labels) == ("50%", {"app": "web"})
