"""One PodMigrationJob per path through the four services, on kubesim with real NATS and Redis; the truth is
read from the cluster (the PMJ status, pods, Reservations), never from the services' own logs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kubesim.sim import SimHandle
from shared.servers import Server
from tests.e2e.pipeline import conditions, create_job, ended, pipeline, pipeline_config, until_job
from tests.kube import Kube, client_for, with_crds

pytestmark = [pytest.mark.e2e, pytest.mark.integration]


def cluster(
    nodes: int = 3, web: int = 3, node_cpu: int = 4, cpu: str = "1", **web_extra: Any
) -> dict[str, Any]:
    return {
        "name": "lifecycle",
        "nodes": [
            {
                "name": "node-{i}",
                "count": nodes,
                "capacity": {"cpu": str(node_cpu), "memory": "16Gi", "pods": "110"},
            }
        ],
        "workloads": [
            {
                "kind": "Deployment",
                "name": "web",
                "namespace": "default",
                "replicas": web,
                "requests": {"cpu": cpu, "memory": "1Gi"},
                "schedulerName": "koord-scheduler",
                **web_extra,
            }
        ],
    }


def start(kubesim_factory: Callable[..., SimHandle], scenario: dict[str, Any], **options: Any) -> Kube:
    return with_crds(client_for(kubesim_factory(scenario, **options)))


def web_pods(kube: Kube) -> dict[str, Any]:
    pods = kube.core.list_namespaced_pod("default", label_selector="app=web").items
    return {p.metadata.name: p for p in pods}


def reservations(kube: Kube) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = kube.custom.list_cluster_custom_object(
        "scheduling.koordinator.sh", "v1alpha1", "reservations"
    )["items"]
    return found


async def test_reservation_first_moves_the_pod_into_the_reserved_room(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    kube = start(kubesim_factory, cluster())
    pods = web_pods(kube)
    name, pod = sorted(pods.items())[0]
    config = pipeline_config(kube.handle, nats_srv, redis_srv, test_id)
    async with pipeline(config):
        create_job(kube, "move-1", name)
        job = await until_job(kube, "move-1", ended)
    status = job["status"]
    assert status["phase"] == "Succeeded", status
    assert status["status"] == "Complete"
    cs = conditions(job)
    for kind in (
        "ReservationCreated",
        "ReservationScheduled",
        "Eviction",
        "PodBoundReservation",
        "BoundPodReady",
        "ReservationBound",
    ):
        assert cs[kind][0] == "True", (kind, cs)
    # The replacement runs on the reserved node, which is not the old pod's node.
    replacement = kube.core.read_namespaced_pod(status["podRef"]["name"], "default")
    assert replacement.spec.node_name == status["nodeName"] != pod.spec.node_name
    assert name not in web_pods(kube)
    assert reservations(kube) == []  # nothing left behind


async def test_evict_directly_ends_when_the_pod_is_gone(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    kube = start(kubesim_factory, cluster())
    name = sorted(web_pods(kube))[0]
    config = pipeline_config(kube.handle, nats_srv, redis_srv, test_id)
    async with pipeline(config):
        create_job(kube, "direct", name, mode="EvictDirectly")
        job = await until_job(kube, "direct", ended)
    assert job["status"]["phase"] == "Succeeded"
    assert conditions(job)["Eviction"] == ("True", "EvictComplete")
    assert "ReservationCreated" not in conditions(job)
    assert name not in web_pods(kube) and reservations(kube) == []


async def test_unschedulable_reservation_fails_and_leaves_the_pod(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    # Each node is 3/4 full with one replica: the replacement fits only on its own node, which is excluded.
    kube = start(kubesim_factory, cluster(nodes=2, web=2, cpu="3"))
    name = sorted(web_pods(kube))[0]
    config = pipeline_config(kube.handle, nats_srv, redis_srv, test_id)
    async with pipeline(config):
        create_job(kube, "nowhere", name)
        job = await until_job(kube, "nowhere", ended)
    assert (job["status"]["phase"], job["status"]["reason"]) == ("Failed", "Unschedulable")
    assert conditions(job)["ReservationScheduled"] == ("False", "Unschedulable")
    assert name in web_pods(kube)  # not touched
    assert web_pods(kube)[name].metadata.deletion_timestamp is None
    assert reservations(kube) == []  # cleaned up


async def test_a_missing_pod_fails_the_job(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    kube = start(kubesim_factory, cluster())
    config = pipeline_config(kube.handle, nats_srv, redis_srv, test_id)
    async with pipeline(config):
        create_job(kube, "ghost", "no-such-pod")
        job = await until_job(kube, "ghost", ended, within=30)
    assert (job["status"]["phase"], job["status"]["reason"]) == ("Failed", "MissingPod")
