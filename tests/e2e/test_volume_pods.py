"""A pod pinned by its volume, as Podherd meets one on a real cluster: a StatefulSet's pod whose claim's
volume lives in zone b. Its room is reserved where the scheduler will put its replacement, in zone b,
though zone a has more room; with no room left in zone b, the job fails on the scheduler's own reason and
the pod stays; and with `ignorePvcPods` the `PVC` gate refuses it before anything is reserved."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import kubernetes
import pytest

from kubesim.sim import SimHandle
from podherd.harness.servers import Server
from tests.e2e.pipeline import create_job, ended, pipeline, pipeline_config, until_job
from tests.e2e.test_lifecycle import reservations, start
from tests.kube import Kube, watch_until

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

ZONE = "topology.kubernetes.io/zone"


def zoned_cluster() -> dict[str, Any]:
    """Zone a: one roomy node. Zone b: two nodes, each just big enough for one pod of the database."""
    return {
        "name": "volumes",
        "nodes": [
            {"name": "a-{i}", "count": 1, "capacity": {"cpu": "8", "memory": "16Gi"}, "labels": {ZONE: "a"}},
            {"name": "b-{i}", "count": 2, "capacity": {"cpu": "2", "memory": "16Gi"}, "labels": {ZONE: "b"}},
        ],
    }


def database(kube: Kube, namespace: str = "default") -> list[Any]:
    """A StatefulSet of two 2-CPU pods whose volumes the class can only make in zone b; its pods, once
    running (one on each node of zone b)."""
    if namespace != "default":
        kube.core.create_namespace({"metadata": {"name": namespace}})
    zone_b: Any = {
        "metadata": {"name": "zone-b"},
        "provisioner": "disk.csi.example.com",
        "volumeBindingMode": "WaitForFirstConsumer",
        "allowedTopologies": [{"matchLabelExpressions": [{"key": ZONE, "values": ["b"]}]}],
    }
    kubernetes.client.StorageV1Api(kube.api).create_storage_class(zone_b)
    container = {"name": "db", "image": "busybox", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}
    claim = {
        "metadata": {"name": "data"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "zone-b",
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }
    kube.apps.create_namespaced_stateful_set(
        namespace,
        {
            "metadata": {"name": "db"},
            "spec": {
                "replicas": 2,
                "podManagementPolicy": "Parallel",
                "selector": {"matchLabels": {"app": "db"}},
                "template": {
                    "metadata": {"labels": {"app": "db"}},
                    "spec": {"schedulerName": "koord-scheduler", "containers": [container]},
                },
                "volumeClaimTemplates": [claim],
            },
        },
    )
    pods = watch_until(
        kube.core.list_namespaced_pod,
        lambda s: len(s) == 2 and all(p.status.phase == "Running" for p in s.values()),
        namespace=namespace,
        label_selector="app=db",
    )
    return sorted(pods.values(), key=lambda p: p.metadata.name)


async def test_a_pod_pinned_by_its_volume_is_reserved_in_its_zone_or_refused_as_configured(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    """In a namespace of its own: the Reservation's pod template carries it, or the scheduler would look
    for the claim in `default`."""
    kube = start(kubesim_factory, zoned_cluster())
    pod, other = database(kube, "shop")
    config = pipeline_config(kube.handle, nats_srv, redis_srv, test_id)
    async with pipeline(config):
        create_job(kube, "no-room", pod.metadata.name, "shop", ttl="3s")  # waited for until the ttl
        refused = (await until_job(kube, "no-room", ended))["status"]
        kube.core.create_node(
            {
                "metadata": {"name": "b-3", "labels": {ZONE: "b"}},
                "status": {"capacity": {"cpu": "2", "memory": "16Gi", "pods": "110"}},
            }
        )
        create_job(kube, "moved", pod.metadata.name, "shop")
        moved = (await until_job(kube, "moved", ended))["status"]
    assert (refused["phase"], refused["reason"]) == ("Failed", "Timeout"), refused
    assert (
        "0/3 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) had volume node affinity conflict." in refused["message"]
    ), refused
    assert moved["phase"] == "Succeeded", moved
    assert moved["nodeName"] == "b-3"  # zone a's room was never the replacement's
    replacement = kube.core.read_namespaced_pod(pod.metadata.name, "shop")
    assert (replacement.spec.node_name, replacement.metadata.uid != pod.metadata.uid) == ("b-3", True)
    claim = kube.core.read_namespaced_persistent_volume_claim(f"data-{pod.metadata.name}", "shop")
    assert claim.status.phase == "Bound"  # the same claim, and its volume, followed the pod
    assert reservations(kube) == []

    # Configured to leave pods with claims alone, Podherd refuses it before reserving anything.
    gated = pipeline_config(kube.handle, nats_srv, redis_srv, f"{test_id}-pvc", ignorePvcPods=True)
    async with pipeline(gated):
        create_job(kube, "gated", other.metadata.name, "shop")
        status = (await until_job(kube, "gated", ended))["status"]
    assert status["phase"] == "Failed", status
    assert "the pod has a PersistentVolumeClaim (ignorePvcPods is on)" in status["message"], status
    assert reservations(kube) == []
    assert kube.core.read_namespaced_pod(other.metadata.name, "shop").metadata.uid == other.metadata.uid
