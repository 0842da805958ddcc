"""A job's paths through the services, written once and run on both engines: kubesim (`make test`) and the
real control plane, where koord-scheduler places and binds the Reservations, kube-apiserver judges the
evictions and kube-controller-manager makes the replacements (`make test-real`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from podherd.harness.servers import Server
from shared.api.annotations import RESERVATION_ALLOCATED
from tests.conformance.conftest import GROUP, VERSION, Scoped
from tests.conformance.engines import cluster
from tests.e2e.pipeline import conditions, create_job, ended, pipeline, pipeline_config, until_job

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

Start = Callable[[dict[str, Any]], Scoped]


def web_pods(c: Scoped) -> dict[str, Any]:
    pods = c.kube.core.list_namespaced_pod(c.namespace, label_selector="app=web").items
    return {p.metadata.name: p for p in pods if p.metadata.deletion_timestamp is None}


def reservations(c: Scoped) -> list[str]:
    items = c.kube.custom.list_cluster_custom_object(GROUP, VERSION, "reservations")["items"]
    return [r["metadata"]["name"] for r in items if r["metadata"]["name"].startswith(c.scope)]


def allocated_by(pod: Any) -> str:
    """Who wrote the pod's reservation-allocated annotation: the field manager that owns it."""
    for entry in pod.metadata.managed_fields or []:
        annotations = ((entry.fields_v1 or {}).get("f:metadata") or {}).get("f:annotations") or {}
        if f"f:{RESERVATION_ALLOCATED}" in annotations:
            return str(entry.manager)
    return ""


async def test_reservation_first_moves_the_pod_into_room_the_scheduler_placed(
    engine_cluster: Start, nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    c = engine_cluster(cluster())
    name, pod = sorted(web_pods(c).items())[0]
    config = pipeline_config(c.kube.handle, nats_srv, redis_srv, test_id)
    job_name = c.job_name("move")
    async with pipeline(config):
        create_job(c.kube, job_name, name, namespace=c.namespace)
        job = await until_job(c.kube, job_name, ended, within=60)
    status = job["status"]
    assert status["phase"] == "Succeeded", status
    for kind in ("ReservationCreated", "ReservationScheduled", "Eviction", "PodBoundReservation"):
        assert conditions(job)[kind][0] == "True", (kind, conditions(job))
    replacement = c.kube.core.read_namespaced_pod(status["podRef"]["name"], c.namespace)
    assert replacement.spec.node_name == status["nodeName"] != pod.spec.node_name
    # The scheduler bound the replacement into the room, and said so on the pod itself.
    allocated = (replacement.metadata.annotations or {}).get(RESERVATION_ALLOCATED, "")
    assert job_name in allocated, replacement.metadata.annotations
    assert allocated_by(replacement) == "koord-scheduler"
    assert name not in web_pods(c)


async def test_evict_directly_ends_when_the_pod_is_gone(
    engine_cluster: Start, nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    c = engine_cluster(cluster())
    name = sorted(web_pods(c))[0]
    config = pipeline_config(c.kube.handle, nats_srv, redis_srv, test_id)
    job_name = c.job_name("direct")
    async with pipeline(config):
        create_job(c.kube, job_name, name, namespace=c.namespace, mode="EvictDirectly")
        job = await until_job(c.kube, job_name, ended, within=60)
    assert job["status"]["phase"] == "Succeeded", job["status"]
    assert conditions(job)["Eviction"] == ("True", "EvictComplete")
    assert "ReservationCreated" not in conditions(job)
    assert name not in web_pods(c) and reservations(c) == []


async def test_a_reservation_that_fits_nowhere_fails_the_job_and_leaves_the_pod(
    engine_cluster: Start, nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    # Each node is 3/4 full with one replica: the replacement fits only on its own node, which is excluded.
    c = engine_cluster(cluster(nodes=2, web=2, cpu="3"))
    name = sorted(web_pods(c))[0]
    config = pipeline_config(c.kube.handle, nats_srv, redis_srv, test_id)
    job_name = c.job_name("nowhere")
    async with pipeline(config):
        create_job(c.kube, job_name, name, namespace=c.namespace)
        job = await until_job(c.kube, job_name, ended, within=60)
    assert (job["status"]["phase"], job["status"]["reason"]) == ("Failed", "Unschedulable"), job["status"]
    assert conditions(job)["ReservationScheduled"] == ("False", "Unschedulable")
    assert name in web_pods(c)  # not touched
    assert reservations(c) == []  # cleaned up


async def test_a_budget_refusing_the_eviction_shows_in_status_then_the_job_succeeds(
    engine_cluster: Start, nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    c = engine_cluster(cluster())
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": c.namespace},
        "spec": {"minAvailable": 3, "selector": {"matchLabels": {"app": "web"}}},
    }
    c.kube.policy.create_namespaced_pod_disruption_budget(c.namespace, budget)
    name = sorted(web_pods(c))[0]
    # The arbitrator does not see budgets here (its watcher leaves them out): the API server's eviction
    # check is what refuses, as when a budget tightens between admission and eviction.
    blind = ["pods", "podmigrationjobs", "reservations", "deployments", "replicasets", "statefulsets"]
    config = pipeline_config(c.kube.handle, nats_srv, redis_srv, test_id, watch=blind)
    job_name = c.job_name("budgeted")

    def blocked(job: dict[str, Any]) -> bool:
        return any(
            x["type"] == "Eviction" and "disruption budget web" in (x.get("message") or "")
            for x in (job.get("status") or {}).get("conditions") or []
        )

    async with pipeline(config):
        create_job(c.kube, job_name, name, namespace=c.namespace)
        held = await until_job(c.kube, job_name, blocked, within=60)
        assert held["status"]["phase"] == "Running"
        assert name in web_pods(c)
        c.kube.policy.patch_namespaced_pod_disruption_budget(
            "web", c.namespace, {"spec": {"minAvailable": 2}}
        )
        job = await until_job(c.kube, job_name, ended, within=60)
    assert job["status"]["phase"] == "Succeeded", job["status"]
    assert name not in web_pods(c)
