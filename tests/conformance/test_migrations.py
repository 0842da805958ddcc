"""A job's paths through the services, written once and run on both engines: kubesim (`make test`) and the
real control plane, where koord-scheduler places and binds the Reservations, kube-apiserver judges the
evictions and kube-controller-manager makes the replacements (`make test-real`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import nats
import pytest
import redis.asyncio as aioredis

from podherd.harness.servers import Server
from services.executor.reservations import reservation_for
from shared.api.annotations import RESERVATION_ALLOCATED
from shared.api.names import ANNOTATION_STRATEGY, ANNOTATION_SURGE
from shared.api.pmj import PodMigrationJob
from shared.api.pod import pod_from
from shared.config.model import PodherdConfig
from shared.nats import bus
from tests.conformance.conftest import Scoped
from tests.conformance.engines import add_node, cluster
from tests.conformance.watched import watched
from tests.e2e.pipeline import GROUP, VERSION, conditions, create_job, ended, pipeline_config, until_job
from tests.e2e.test_lifecycle import until_released
from tests.kube import watch_until
from tests.polling import until

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

Start = Callable[[dict[str, Any]], Scoped]
# A budget the arbitrator does not see (its watcher leaves PDBs out): admission passes and the eviction
# meets the API server's check, as when a budget tightens between admission and eviction.
BLIND_TO_BUDGETS = ["pods", "podmigrationjobs", "reservations", "deployments", "replicasets", "statefulsets"]


def app_pods(c: Scoped, app: str = "web") -> dict[str, Any]:
    pods = c.kube.core.list_namespaced_pod(c.namespace, label_selector=f"app={app}").items
    return {p.metadata.name: p for p in pods if p.metadata.deletion_timestamp is None}


def reservations(c: Scoped) -> list[str]:
    items = c.kube.custom.list_cluster_custom_object(GROUP, VERSION, "reservations")["items"]
    return [r["metadata"]["name"] for r in items if r["metadata"]["name"].startswith(c.scope)]


async def until_no_reservations(c: Scoped) -> None:
    """Room a job did not use goes with its cleanup, a command after the job's terminal status."""
    await until(lambda: not reservations(c), within=30, what="the test's Reservations deleted", every=0.2)


def allocated_by(pod: Any) -> str:
    """Who wrote the pod's reservation-allocated annotation: the field manager that owns it."""
    for entry in pod.metadata.managed_fields or []:
        annotations = ((entry.fields_v1 or {}).get("f:metadata") or {}).get("f:annotations") or {}
        if f"f:{RESERVATION_ALLOCATED}" in annotations:
            return str(entry.manager)
    return ""


def budget(c: Scoped, min_available: int) -> None:
    body = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": c.namespace},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": "web"}}},
    }
    c.kube.policy.create_namespaced_pod_disruption_budget(c.namespace, body)


def loosen(c: Scoped, min_available: int) -> None:
    c.kube.policy.patch_namespaced_pod_disruption_budget(
        "web", c.namespace, {"spec": {"minAvailable": min_available}}
    )


def evicting_blocked(job: dict[str, Any]) -> bool:
    return any(
        x["type"] == "Eviction" and "disruption budget web" in (x.get("message") or "")
        for x in (job.get("status") or {}).get("conditions") or []
    )


async def test_reservation_first_moves_the_pod_into_room_the_scheduler_placed(
    engine_cluster: Start, nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    c = engine_cluster(cluster())
    name, pod = sorted(app_pods(c).items())[0]
    config = pipeline_config(c.kube.handle, nats_srv, redis_srv, test_id)
    job_name = c.job_name("move")
    nc = await nats.connect(nats_srv.url)
    # The ledger release (and the statistics written with it) follows the terminal status, by design.
    released = await nc.subscribe(bus.Subjects(test_id).ledger_released)
    async with watched(config):
        uid = create_job(c.kube, job_name, name, namespace=c.namespace)["metadata"]["uid"]
        job = await until_job(c.kube, job_name, ended, within=60)
        await until_released(released, uid)
    await nc.close()
    status = job["status"]
    assert (status["phase"], status["status"]) == ("Succeeded", "Complete"), status
    for kind in (
        "ReservationCreated",
        "ReservationScheduled",
        "Eviction",
        "PodBoundReservation",
        "BoundPodReady",
        "ReservationBound",
    ):
        assert conditions(job)[kind][0] == "True", (kind, conditions(job))
    # The replacement runs on the reserved node, which is not the old pod's node: the scheduler bound it
    # into the room, and said so on the pod itself.
    replacement = c.kube.core.read_namespaced_pod(status["podRef"]["name"], c.namespace)
    assert replacement.spec.node_name == status["nodeName"] != pod.spec.node_name
    allocated = (replacement.metadata.annotations or {}).get(RESERVATION_ALLOCATED, "")
    assert job_name in allocated, replacement.metadata.annotations
    assert allocated_by(replacement) == "koord-scheduler"
    assert name not in app_pods(c)
    assert reservations(c) == []  # nothing left behind
    ref = job["spec"]["reservationOptions"]["reservationRef"]  # the room it held, as Koordinator names it
    assert (ref["apiVersion"], ref["kind"], ref["name"]) == (f"{GROUP}/{VERSION}", "Reservation", job_name)
    assert ref["uid"]
    client = aioredis.from_url(redis_srv.url)
    migrations = await client.hget(f"{test_id}:stats:workload-migrations", f"Deployment/{c.namespace}/web")
    await client.aclose()
    assert migrations == b"1"  # counted for the arbitrator's sort
    # Events are sent beside the reconciles, as client-go's recorder sends them: wait for them.
    wanted = {"Running", "ReservationCreated", "EvictComplete", "Succeeded"}
    await asyncio.to_thread(
        watch_until,
        c.kube.core.list_namespaced_event,
        lambda s: wanted <= {e.reason for e in s.values()},
        namespace="default",
        field_selector=f"involvedObject.name={job_name}",
    )


async def test_evict_directly_ends_when_the_pod_is_gone(
    engine_cluster: Start, nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    c = engine_cluster(cluster())
    name = sorted(app_pods(c))[0]
    config = pipeline_config(c.kube.handle, nats_srv, redis_srv, test_id)
    job_name = c.job_name("direct")
    async with watched(config):
        create_job(c.kube, job_name, name, namespace=c.namespace, mode="EvictDirectly")
        job = await until_job(c.kube, job_name, ended, within=60)
    assert job["status"]["phase"] == "Succeeded", job["status"]
    assert conditions(job)["Eviction"] == ("True", "EvictComplete")
    assert "ReservationCreated" not in conditions(job)
    assert name not in app_pods(c) and reservations(c) == []


def unschedulable(job: dict[str, Any]) -> bool:
    return conditions(job).get("ReservationScheduled") == ("False", "Unschedulable")


async def test_a_reservation_that_cannot_be_placed_waits_for_room_and_moves_the_pod_once_there_is(
    engine_cluster: Start, nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    """As Koordinator: the scheduler keeps trying the Reservation, the job waits (nothing evicted), and room
    made later (a node added) moves the pod; a job whose ttl passes first ends Timeout, naming why."""
    # Each node is 3/4 full with one replica: the replacement fits only on its own node, which is excluded.
    c = engine_cluster(cluster(nodes=2, web=2, cpu="3"))
    first, second = sorted(app_pods(c))
    config = pipeline_config(c.kube.handle, nats_srv, redis_srv, test_id)
    waits, brief = c.job_name("waits"), c.job_name("brief")
    async with watched(config):
        create_job(c.kube, brief, second, namespace=c.namespace, ttl="4s")
        timed_out = await until_job(c.kube, brief, ended, within=60)
        create_job(c.kube, waits, first, namespace=c.namespace, ttl="120s")
        waiting = await until_job(c.kube, waits, unschedulable, within=60)
        assert waiting["status"]["phase"] == "Running" and first in app_pods(c), waiting["status"]
        add_node(c, "node-3", cpu="4")
        moved = await until_job(c.kube, waits, ended, within=60)
        await until_no_reservations(c)
    assert (timed_out["status"]["phase"], timed_out["status"]["reason"]) == ("Failed", "Timeout")
    assert "to be scheduled: 0/2 nodes are available" in timed_out["status"]["message"], timed_out["status"]
    assert second in app_pods(c)  # never evicted
    assert moved["status"]["phase"] == "Succeeded", moved["status"]
    assert moved["status"]["nodeName"] == f"{c.scope}-node-3"
    assert first not in app_pods(c)


def held_by_budget(c: Scoped, nats_srv: Server, redis_srv: Server, test_id: str) -> tuple[str, PodherdConfig]:
    """A budget (unseen by the arbitrator) refusing every web pod's eviction, the pod to move, and the
    pipeline's configuration."""
    budget(c, 3)
    name = sorted(app_pods(c))[0]
    return name, pipeline_config(c.kube.handle, nats_srv, redis_srv, test_id, watch=BLIND_TO_BUDGETS)


async def test_a_budget_refusing_the_eviction_shows_in_status_then_the_job_succeeds(
    engine_cluster: Start, nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    c = engine_cluster(cluster())
    name, config = held_by_budget(c, nats_srv, redis_srv, test_id)
    job_name = c.job_name("budgeted")
    async with watched(config):
        create_job(c.kube, job_name, name, namespace=c.namespace)
        held = await until_job(c.kube, job_name, evicting_blocked, within=60)
        assert held["status"]["phase"] == "Running"
        assert name in app_pods(c)
        loosen(c, 2)
        job = await until_job(c.kube, job_name, ended, within=60)
    assert job["status"]["phase"] == "Succeeded", job["status"]
    assert name not in app_pods(c)


async def test_every_service_killed_mid_job_and_started_again_loses_nothing(
    engine_cluster: Start, nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    c = engine_cluster(cluster())
    name, config = held_by_budget(c, nats_srv, redis_srv, test_id)
    job_name = c.job_name("survivor")
    async with watched(config) as p:
        create_job(c.kube, job_name, name, namespace=c.namespace)
        # The Reservation exists and the eviction is being refused: kill all four, as SIGKILL would.
        await until_job(c.kube, job_name, evicting_blocked, within=60)
        for running in list(p.running):
            await p.kill(running)
        loosen(c, 2)
        for service in ("watcher", "arbitrator", "executor", "tracker"):
            await p.start(service, "r1")
        job = await until_job(c.kube, job_name, ended, within=60)
    assert job["status"]["phase"] == "Succeeded", job["status"]
    assert name not in app_pods(c)
    assert len(app_pods(c)) == 3  # one replacement, not two
    await until_no_reservations(c)


@pytest.mark.parametrize("room", ["operators-room", "reuse"])
async def test_a_named_reservation_is_used_and_left_to_its_owner(
    engine_cluster: Start, nats_srv: Server, redis_srv: Server, test_id: str, room: str
) -> None:
    """The second is named as Podherd names its own for this job: without Podherd's labels, it is still the
    user's."""
    c = engine_cluster(cluster())
    name = sorted(app_pods(c))[0]
    job_name, room = c.job_name("reuse"), c.job_name(room)
    pod = c.kube.api.sanitize_for_serialization(c.kube.core.read_namespaced_pod(name, c.namespace))
    mine = reservation_for(PodMigrationJob(), pod_from(pod), "5m")
    mine["metadata"] = {"name": room}
    c.kube.custom.create_cluster_custom_object(GROUP, VERSION, "reservations", mine)
    config = pipeline_config(c.kube.handle, nats_srv, redis_srv, test_id)
    async with watched(config):
        ref = {"reservationRef": {"name": room}}
        create_job(c.kube, job_name, name, namespace=c.namespace, reservationOptions=ref)
        job = await until_job(c.kube, job_name, ended, within=60)
    assert job["status"]["phase"] == "Succeeded", job["status"]
    used = c.kube.custom.get_cluster_custom_object(GROUP, VERSION, "reservations", room)
    assert used["status"]["phase"] == "Succeeded"  # taken by the replacement, and still there: not ours
    assert job["status"]["nodeName"] == used["status"]["nodeName"]
    assert reservations(c) == [room]  # no second one was made
    assert job["spec"]["reservationOptions"]["reservationRef"] == {"name": room}  # left as named


async def test_a_statefulset_pod_comes_back_with_its_name_in_the_reserved_room(
    engine_cluster: Start, nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    db = {
        "kind": "StatefulSet",
        "name": "db",
        "replicas": 2,
        "requests": {"cpu": "1", "memory": "1Gi"},
        "schedulerName": "koord-scheduler",
    }
    c = engine_cluster({**cluster(web=0), "workloads": [db]})
    before = app_pods(c, "db")["db-0"]
    config = pipeline_config(c.kube.handle, nats_srv, redis_srv, test_id)
    job_name = c.job_name("db")
    async with watched(config):
        create_job(c.kube, job_name, "db-0", namespace=c.namespace)
        job = await until_job(c.kube, job_name, ended, within=60)
    assert job["status"]["phase"] == "Succeeded", job["status"]
    after = app_pods(c, "db")["db-0"]  # the same name, a new pod
    assert after.metadata.uid != before.metadata.uid
    assert after.spec.node_name == job["status"]["nodeName"] != before.spec.node_name
    assert job_name in (after.metadata.annotations or {}).get(RESERVATION_ALLOCATED, "")


async def test_a_single_replica_behind_a_zero_budget_moves_by_surge(
    engine_cluster: Start, nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    c = engine_cluster(cluster(web=1, pdb={"minAvailable": 1}))
    ((name, old),) = app_pods(c).items()
    config = pipeline_config(c.kube.handle, nats_srv, redis_srv, test_id)
    job_name = c.job_name("surge")
    async with watched(config):
        create_job(c.kube, job_name, name, namespace=c.namespace, annotations={ANNOTATION_STRATEGY: "Surge"})
        job = await until_job(c.kube, job_name, ended, within=60)
        await until_no_reservations(c)
    status = job["status"]
    assert status["phase"] == "Succeeded", status
    assert "by a surge" in status["message"]
    ((new_name, new),) = app_pods(c).items()
    assert new_name == status["podRef"]["name"] != name
    assert new.spec.node_name == status["nodeName"] != old.spec.node_name
    assert RESERVATION_ALLOCATED in (new.metadata.annotations or {})
    deploy = c.kube.apps.read_namespaced_deployment("web", c.namespace)
    assert deploy.spec.replicas == 1 and ANNOTATION_SURGE not in (deploy.metadata.annotations or {})


async def test_every_pod_of_a_workload_moved_at_once_lands_in_reserved_room(
    engine_cluster: Start, nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    """Jobs for all the replicas of one Deployment, together, with every limit open: each replacement may
    take any of the workload's Reservations, and each takes one. (With Koordinator's `reservation-order`
    label on the Reservations, koord-scheduler v1.8.0 sent 2-3 of the 8 outside any room.)"""
    c = engine_cluster(cluster(nodes=4, web=8, node_cpu=8, cpu="500m"))
    pods = sorted(app_pods(c))
    open_limits: dict[str, Any] = {
        "maxMigratingPerWorkload": "100%",
        "maxUnavailablePerWorkload": "100%",
        "maxMigratingPerNode": 100,
        "skipCheckExpectedReplicas": True,
    }
    config = pipeline_config(c.kube.handle, nats_srv, redis_srv, test_id, **open_limits)
    names = [c.job_name(f"all-{i}") for i in range(len(pods))]
    async with watched(config):
        for name, pod in zip(names, pods, strict=True):
            create_job(c.kube, name, pod, namespace=c.namespace, ttl="30s")
        jobs = [await until_job(c.kube, name, ended, within=60) for name in names]
        await until_no_reservations(c)
    assert [j["status"]["phase"] for j in jobs] == ["Succeeded"] * len(pods), [j["status"] for j in jobs]
    moved = app_pods(c)
    assert not set(pods) & set(moved) and len(moved) == len(pods)
    assert all(RESERVATION_ALLOCATED in (p.metadata.annotations or {}) for p in moved.values())
