"""One PodMigrationJob per path through the four services, on kubesim with real NATS and Redis; the truth is
read from the cluster (the PMJ status, pods, Reservations), never from the services' own logs."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable
from typing import Any

import kubernetes
import nats
import pytest
import redis.asyncio as aioredis
from prometheus_client import REGISTRY

from kubesim.sim import SimHandle
from podherd.client import audit_records
from podherd.harness.servers import Server
from shared.api import codec
from shared.api.messages import SlotsReleased
from shared.api.pod import pod_from
from shared.config.model import PodherdConfig
from shared.ledger.store import Ledger
from shared.nats import bus
from tests.e2e.pipeline import (
    GROUP,
    PLURAL,
    VERSION,
    conditions,
    create_job,
    ended,
    pipeline,
    pipeline_config,
    until_executors_idle,
    until_job,
)
from tests.kube import Kube, client_for, watch_until, with_crds

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


def until_no_reservations(kube: Kube, stalled: float = 30.0) -> None:
    """Every Reservation gone. Room a job did not use outlives it while a sibling of its workload is in
    flight, and goes with the last job's cleanup, a command after that job's terminal status: wait for it
    (failing after `stalled` seconds without a deletion). Listed, then followed from the list's
    resourceVersion: one deleted between a look and a watch is not waited for until the watch times out."""
    group, version, plural = "scheduling.koordinator.sh", "v1alpha1", "reservations"
    listing = kube.custom.list_cluster_custom_object(group, version, plural)
    left = {r["metadata"]["name"] for r in listing["items"]}
    seen = listing["metadata"]["resourceVersion"]
    deadline = time.monotonic() + stalled
    while left:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(
                f"Reservations still there after {stalled}s without a deletion: {sorted(left)}"
            )
        watch = kubernetes.watch.Watch()
        for event in watch.stream(
            kube.custom.list_cluster_custom_object,
            group,
            version,
            plural,
            resource_version=seen,
            timeout_seconds=max(1, int(remaining)),
        ):
            meta = event["object"]["metadata"]
            seen = meta.get("resourceVersion") or seen
            if event["type"] == "DELETED":
                left.discard(meta["name"])
                deadline = time.monotonic() + stalled
            elif event["type"] == "ADDED":
                left.add(meta["name"])
            if not left:
                watch.stop()
                break


async def room_taken(kube: Kube, reservation: str) -> None:
    """Until the Reservation has been taken by a pod (allocateOnce: it is then Succeeded)."""
    await asyncio.to_thread(
        watch_until,
        kube.custom.list_cluster_custom_object,
        lambda state: (state[f"/{reservation}"].get("status") or {}).get("phase") == "Succeeded",
        30,
        group=GROUP,
        version=VERSION,
        plural="reservations",
    )


def waiting_for_replacement(job: dict[str, Any]) -> bool:
    """Evicted, its replacement bound to the room but not Ready yet."""
    return conditions(job).get("BoundPodReady") == ("False", "WaitForBoundPodReady")


async def test_a_job_in_flight_counts_once_against_max_unavailable(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    # 6 replicas: maxUnavailablePerWorkload is 2 by default. New replicas pass their readiness probe only
    # after ten minutes, so each moved pod's replacement stays not Ready for the whole test.
    probe = {"tcpSocket": {"port": 80}, "initialDelaySeconds": 600}
    kube = start(kubesim_factory, cluster(nodes=3, web=6, node_cpu=8, readinessProbe=probe))
    first, second, third = sorted(web_pods(kube))[:3]  # on three nodes
    config = pipeline_config(kube.handle, nats_srv, redis_srv, test_id, maxMigratingPerWorkload=5)
    nc = await nats.connect(nats_srv.url)
    async with pipeline(config):
        create_job(kube, "first", first)
        await until_job(kube, "first", waiting_for_replacement)
        # One replica is missing, and one job is in flight for it: one unavailable, so a second may go.
        create_job(kube, "second", second)
        await until_job(kube, "second", waiting_for_replacement)
        # Two in flight, each counted once: the limit is reached, and a third waits for it.
        create_job(kube, "third", third)
        async with asyncio.timeout(30):
            deferral = await unavailable_deferral(nc, bus.Subjects(test_id), "third")
        job = kube.custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, "third")
    await nc.close()
    assert (
        deferral
        == "deferred: deferred: maxUnavailablePerWorkload 2/2 on workload Deployment/default/web "
        + ("(0 more unavailable)")
    )
    assert (job.get("status") or {}).get("phase") in (None, "Pending"), job
    # The first two evicted (gone, or still terminating as the kubelet ends them), the third untouched.
    pods = {n: p for n, p in web_pods(kube).items() if p.metadata.deletion_timestamp is None}
    assert first not in pods and second not in pods and third in pods
    assert sum(1 for p in pods.values() if not _ready(p)) == 2  # the two replacements, and nothing more


def _ready(pod: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


async def unavailable_deferral(nc: Any, subjects: bus.Subjects, job: str) -> str:
    """The arbitrator's word on the job once it is deferred by maxUnavailablePerWorkload (or admitted)."""
    async for data in audit_records(nc, subjects, job, follow=True):
        record = json.loads(data)
        decision = (record.get("details") or {}).get("decision")
        if decision == "admitted" or (
            decision == "deferred" and record["rule"] == "maxUnavailablePerWorkload"
        ):
            return f"{decision}: {record['message']}"
    raise AssertionError("the audit stream ended")


HOLD = {"metadata": {"finalizers": ["example.com/hold"]}}


async def held(ledger: Ledger) -> set[str]:
    """The jobs that hold anything in the ledger: a slot or a pod claim."""
    snapshot = await ledger.snapshot()
    return {m for members in snapshot["slots"].values() for m in members} | set(snapshot["claims"].values())


def still_going(job: dict[str, Any]) -> bool:
    return "grace period ends" in ((job.get("status") or {}).get("message") or "")


@pytest.mark.parametrize("mode", ["EvictDirectly", "ReservationFirst"])
async def test_a_pod_stuck_terminating_holds_the_job_and_its_slots_until_it_is_gone(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str, mode: str
) -> None:
    kube = start(kubesim_factory, cluster())
    name = sorted(web_pods(kube))[0]
    kube.core.patch_namespaced_pod(name, "default", HOLD)  # a finalizer keeps the object after its deletion
    node = kube.core.read_namespaced_pod(name, "default").spec.node_name
    config = pipeline_config(kube.handle, nats_srv, redis_srv, test_id)
    client = aioredis.from_url(redis_srv.url)
    ledger = Ledger(client, test_id, 600)
    nc = await nats.connect(nats_srv.url)
    releases = await nc.subscribe(bus.Subjects(test_id).ledger_released)
    async with pipeline(config):
        uid = create_job(kube, "stuck", name, mode=mode)["metadata"]["uid"]
        waiting = await until_job(kube, "stuck", still_going)
        assert waiting["status"]["phase"] == "Running", waiting["status"]
        assert f"pod default/{name} is terminating on node" in waiting["status"]["message"]
        assert f"on node {node}" in waiting["status"]["message"]
        assert uid in await held(ledger)  # its slots are held while it waits
        kube.core.patch_namespaced_pod(name, "default", {"metadata": {"finalizers": None}})
        job = await until_job(kube, "stuck", ended)
        await until_released(releases, uid)
    assert job["status"]["phase"] == "Succeeded", job["status"]
    assert uid not in await held(ledger)
    await client.aclose()
    await nc.close()


async def until_released(releases: Any, uid: str) -> None:
    """Until the tracker announces that job `uid`'s slots are released."""
    while codec.decode((await releases.next_msg(timeout=30)).data, SlotsReleased).job_uid != uid:
        pass


async def test_a_pod_that_never_goes_times_the_job_out_naming_it(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    kube = start(kubesim_factory, cluster())
    name = sorted(web_pods(kube))[0]
    kube.core.patch_namespaced_pod(name, "default", HOLD)
    node = kube.core.read_namespaced_pod(name, "default").spec.node_name
    config = pipeline_config(kube.handle, nats_srv, redis_srv, test_id)
    client = aioredis.from_url(redis_srv.url)
    nc = await nats.connect(nats_srv.url)
    releases = await nc.subscribe(bus.Subjects(test_id).ledger_released)
    async with pipeline(config):
        uid = create_job(kube, "never-gone", name, mode="EvictDirectly", ttl="6s")["metadata"]["uid"]
        job = await until_job(kube, "never-gone", ended)
        await until_released(releases, uid)  # the release follows the terminal status, by design
        released = await held(Ledger(client, test_id, 600))
    await client.aclose()
    await nc.close()
    assert (job["status"]["phase"], job["status"].get("reason")) == ("Failed", "Timeout"), job["status"]
    assert f"pod default/{name} is terminating on node" in job["status"]["message"]
    assert f"on node {node}" in job["status"]["message"]
    assert uid not in released
    kube.core.patch_namespaced_pod(name, "default", {"metadata": {"finalizers": None}})


async def test_a_missing_pod_fails_the_job(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    kube = start(kubesim_factory, cluster())
    config = pipeline_config(kube.handle, nats_srv, redis_srv, test_id)
    async with pipeline(config):
        create_job(kube, "ghost", "no-such-pod")
        job = await until_job(kube, "ghost", ended, within=30)
    assert (job["status"]["phase"], job["status"]["reason"]) == ("Failed", "MissingPod")


# A budget the arbitrator does not see (its watcher leaves PDBs out): admission passes, the eviction gets
# the API server's 429, as when a budget tightens between admission and eviction.
BLIND_TO_BUDGETS = ["pods", "podmigrationjobs", "reservations", "deployments", "replicasets", "statefulsets"]


def tight_budget(kube: Kube, min_available: int) -> None:
    body = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": "web"}}},
    }
    kube.policy.create_namespaced_pod_disruption_budget("default", body)


def loosen_budget(kube: Kube, min_available: int) -> None:
    kube.policy.patch_namespaced_pod_disruption_budget(
        "web", "default", {"spec": {"minAvailable": min_available}}
    )


def held_by_budget(
    kubesim_factory: Callable[..., SimHandle], *, nats: Server, redis: Server, test_id: str
) -> tuple[Kube, str, PodherdConfig]:
    """A cluster whose budget (unseen by the arbitrator) refuses evicting any web pod, the pod to move, and
    the pipeline's configuration."""
    kube = start(kubesim_factory, cluster())
    tight_budget(kube, 3)
    name = sorted(web_pods(kube))[0]
    return kube, name, pipeline_config(kube.handle, nats, redis, test_id, watch=BLIND_TO_BUDGETS)


def evicting_blocked(job: dict[str, Any]) -> bool:
    for c in (job.get("status") or {}).get("conditions") or []:
        if c["type"] == "Eviction" and "disruption budget web" in (c.get("message") or ""):
            return True
    return False


async def test_a_pod_deleted_outright_while_its_eviction_waits_ends_the_job_missing_not_moved(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    """A budget holds the eviction back; meanwhile someone deletes the pod outright (no Eviction API, so no
    DisruptionTarget condition on it) and its ReplicaSet makes another, which may take the reserved room:
    the job did not move the pod, whatever took the room. An eviction landing on the pod as it goes (one
    that raced the deletion, as the executor's may race a rollout's) marks it a disruption target, yet the
    first hand ended it: the job still says so."""
    kube, name, config = held_by_budget(kubesim_factory, nats=nats_srv, redis=redis_srv, test_id=test_id)
    async with pipeline(config):
        create_job(kube, "overtaken", name)
        await until_job(kube, "overtaken", evicting_blocked)
        kube.core.patch_namespaced_pod(name, "default", {"metadata": {"finalizers": ["example.com/hold"]}})
        kube.core.delete_namespaced_pod(name, "default")
        eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}}
        kube.core.create_namespaced_pod_eviction(name, "default", eviction)  # no budget for a pod going
        kube.core.patch_namespaced_pod(name, "default", {"metadata": {"finalizers": None}})
        job = await until_job(kube, "overtaken", ended)
    assert (job["status"]["phase"], job["status"]["reason"]) == ("Failed", "MissingPod"), job["status"]
    assert job["status"]["message"] == f"default/{name} was deleted by others before its eviction"
    assert kube.handle.call(lambda sim: sum(sim.store.evictions.values())) == 0
    assert kube.handle.call(lambda sim: sum(sim.store.evictions_of_going.values())) == 1


async def test_a_reservation_taken_while_the_eviction_waits_is_made_again_before_evicting(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    kube = start(kubesim_factory, cluster())
    tight_budget(kube, 3)
    first, sibling = sorted(web_pods(kube))[:2]
    config = pipeline_config(kube.handle, nats_srv, redis_srv, test_id, watch=BLIND_TO_BUDGETS)
    async with pipeline(config):
        create_job(kube, "patient", first, ttl="40s")
        await until_job(kube, "patient", evicting_blocked)
        # Another replica of the workload goes (as a sibling job's eviction would): its replacement takes the
        # workload's Reservation, the one made for "patient", while the budget still refuses its eviction.
        kube.core.delete_namespaced_pod(sibling, "default")
        await room_taken(kube, "patient")
        loosen_budget(kube, 2)
        job = await until_job(kube, "patient", ended)
    assert job["status"]["phase"] == "Succeeded", job["status"]
    # It reserved again before evicting: both replacements run in reserved room, the sibling's in the first
    # Reservation, the job's pod's in the second. (Evicting anyway would have left one without room.)
    allocated = "scheduling.koordinator.sh/reservation-allocated"
    rooms = {
        json.loads(p.metadata.annotations[allocated])["name"]
        for p in web_pods(kube).values()
        if allocated in (p.metadata.annotations or {})
    }
    assert rooms == {"patient", "patient-2"}, rooms
    # Its reservationRef followed it to the new attempt, and was still taken for Podherd's own room.
    assert job["spec"]["reservationOptions"]["reservationRef"]["name"] == "patient-2"


async def test_room_taken_between_the_check_and_the_eviction_still_ends_the_job_in_reserved_room(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    # Tight: 5 one-CPU replicas on three 2-CPU nodes leave one CPU free, on node-2, which the job reserves.
    kube = start(kubesim_factory, cluster(nodes=3, web=5, node_cpu=2))
    by_node = sorted((p.spec.node_name, name) for name, p in web_pods(kube).items())
    (_, moved), (_, sibling) = by_node[0], by_node[2]  # on node-0 and node-1
    # The eviction of `moved` is held at the API server (a slow webhook) until the room has been taken.
    held = f"default/{moved}"
    kube.handle.call(lambda sim: sim.api.resources.eviction_holds.setdefault(held, asyncio.Event()))
    config = pipeline_config(kube.handle, nats_srv, redis_srv, test_id)
    nc = await nats.connect(nats_srv.url)
    async with pipeline(config):
        create_job(kube, "window", moved)
        async with asyncio.timeout(30):
            checked = await room_checked(nc, bus.Subjects(test_id), "window")
        # The executor found the room Available. Before its eviction lands, another replica of the workload
        # goes (not Podherd's doing), and its replacement takes the room.
        kube.core.delete_namespaced_pod(sibling, "default")
        await room_taken(kube, "window")
        # The tracker sees its room taken while the eviction is on its way: it waits for the eviction, and
        # does not reserve again (in this full cluster a new Reservation could never be scheduled).
        waiting = await until_job(
            kube,
            "window",
            lambda j: "eviction is on its way" in ((j.get("status") or {}).get("message") or ""),
        )
        kube.handle.call(lambda sim: sim.api.resources.eviction_holds[held].set())
        job = await until_job(kube, "window", ended)
    await nc.close()
    assert checked["details"]["reservation"] == "window" and checked["details"]["node"], checked
    assert waiting["status"]["phase"] == "Running", waiting["status"]
    assert job["status"]["phase"] == "Succeeded", job["status"]
    # The job ends with the replacement in its room (the sibling's: replicas are interchangeable), and the
    # moved pod's own replacement takes the place the sibling left: in this full cluster, none is Pending.
    allocated = "scheduling.koordinator.sh/reservation-allocated"
    pods = web_pods(kube)
    replacement = pods[job["status"]["podRef"]["name"]]
    assert json.loads(replacement.metadata.annotations[allocated])["name"] == "window"
    assert moved not in pods and sibling not in pods
    await asyncio.to_thread(
        watch_until,
        kube.core.list_namespaced_pod,
        lambda state: (
            sum(1 for p in state.values() if p.spec.node_name and not p.metadata.deletion_timestamp) == 5
        ),
        10,
        idle=True,  # fails once nothing has changed for 10 s with a replica unplaced
        namespace="default",
        label_selector="app=web",
    )


async def room_checked(nc: Any, subjects: bus.Subjects, job: str) -> dict[str, Any]:
    """The executor's `room-checked` record for the job (what it read just before evicting)."""
    async for data in audit_records(nc, subjects, job, follow=True):
        record: dict[str, Any] = json.loads(data)
        if record.get("action") == "room-checked":
            return record
    raise AssertionError("the audit stream ended")


async def test_timeout_cleans_up_and_evicts_nothing(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    kube, name, config = held_by_budget(kubesim_factory, nats=nats_srv, redis=redis_srv, test_id=test_id)
    async with pipeline(config):
        create_job(kube, "slow", name, ttl="3s")
        job = await until_job(kube, "slow", ended)
        assert (job["status"]["phase"], job["status"]["reason"]) == ("Failed", "Timeout")
        await until_reservations_gone(kube)
        loosen_budget(kube, 0)
        await until_executors_idle(config)  # the refused eviction's retries are over: none may have evicted
    assert name in web_pods(kube) and web_pods(kube)[name].metadata.deletion_timestamp is None


async def test_a_second_job_for_a_terminating_pod_ends_refused_and_the_first_still_sees_it_go(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    kube = start(kubesim_factory, cluster())
    name = sorted(web_pods(kube))[0]
    kube.core.patch_namespaced_pod(name, "default", HOLD)  # terminating until the finalizer goes
    config = pipeline_config(kube.handle, nats_srv, redis_srv, test_id)
    async with pipeline(config):
        create_job(kube, "first", name)
        await until_job(kube, "first", still_going)
        create_job(kube, "second", name)
        second = await until_job(kube, "second", ended)
        assert (second["status"]["phase"], second["status"]["reason"]) == ("Failed", "ForbiddenMigratePod")
        kube.core.patch_namespaced_pod(name, "default", {"metadata": {"finalizers": None}})
        first = await until_job(kube, "first", ended)  # the pod's end reaches the job made for it first
    assert first["status"]["phase"] == "Succeeded", first["status"]


async def test_abort_ends_the_job_and_nothing_is_evicted_afterwards(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    kube, name, config = held_by_budget(kubesim_factory, nats=nats_srv, redis=redis_srv, test_id=test_id)
    async with pipeline(config):
        create_job(kube, "stop-me", name)
        await until_job(kube, "stop-me", evicting_blocked)
        kube.custom.patch_cluster_custom_object(
            GROUP,
            VERSION,
            PLURAL,
            "stop-me",
            {"metadata": {"annotations": {"podherd.io/abort": "changed my mind"}}},
        )
        job = await until_job(kube, "stop-me", ended)
        assert (job["status"]["phase"], job["status"]["reason"]) == ("Aborted", "Aborted")
        await until_reservations_gone(kube)
        loosen_budget(kube, 0)
        await until_executors_idle(config)  # the executor's retries are over: they must not have evicted
    assert name in web_pods(kube) and web_pods(kube)[name].metadata.deletion_timestamp is None


async def test_paused_waits_until_unpaused(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    kube = start(kubesim_factory, cluster())
    name = sorted(web_pods(kube))[0]
    config = pipeline_config(kube.handle, nats_srv, redis_srv, test_id)
    async with pipeline(config):
        create_job(kube, "later", name, paused=True)
        job = await until_job(
            kube, "later", lambda j: "paused" in ((j.get("status") or {}).get("message") or "")
        )
        assert job["status"]["phase"] == "Pending" and name in web_pods(kube)
        kube.custom.patch_cluster_custom_object(GROUP, VERSION, PLURAL, "later", {"spec": {"paused": False}})
        job = await until_job(kube, "later", ended)
    assert job["status"]["phase"] == "Succeeded"


async def test_target_node_pins_the_replacement(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    kube = start(kubesim_factory, cluster(nodes=4))
    pods = web_pods(kube)
    name = sorted(pods)[0]
    here = pods[name].spec.node_name
    target = next(n for n in ("node-4", "node-3", "node-2") if n != here)
    config = pipeline_config(kube.handle, nats_srv, redis_srv, test_id)
    async with pipeline(config):
        create_job(kube, "pinned", name, annotations={"podherd.io/target-node": target})
        job = await until_job(kube, "pinned", ended)
    assert job["status"]["phase"] == "Succeeded"
    assert job["status"]["nodeName"] == target
    assert kube.core.read_namespaced_pod(job["status"]["podRef"]["name"], "default").spec.node_name == target


async def test_a_reservation_template_is_the_reservations_spec_and_places_the_replacement(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    """`reservationOptions.template` as Koordinator reads it: its spec is the Reservation's, its pod template
    (here with a node selector) where the room is made, its metadata the Reservation's labels."""
    kube = start(kubesim_factory, cluster(nodes=4))
    pods = web_pods(kube)
    name = sorted(pods)[0]
    here = pods[name].spec.node_name
    target = next(n for n in ("node-4", "node-3", "node-2") if n != here)
    pod = kube.core.read_namespaced_pod(name, "default")
    pod_spec = kube.api.sanitize_for_serialization(pod.spec)
    pod_spec["nodeSelector"] = {"kubernetes.io/hostname": target}
    template = {
        "metadata": {"labels": {"team": "payments"}},
        "spec": {"template": {"metadata": {"labels": dict(pod.metadata.labels)}, "spec": pod_spec}},
    }
    config = pipeline_config(kube.handle, nats_srv, redis_srv, test_id)
    async with pipeline(config):
        create_job(kube, "templated", name, reservationOptions={"template": template})
        made = await asyncio.to_thread(
            watch_until,
            kube.custom.list_cluster_custom_object,
            lambda state: "/templated" in state,
            group="scheduling.koordinator.sh",
            version="v1alpha1",
            plural="reservations",
        )
        job = await until_job(kube, "templated", ended)
    assert made["/templated"]["metadata"]["labels"]["team"] == "payments"
    assert job["status"]["phase"] == "Succeeded", job["status"]
    assert job["status"]["nodeName"] == target
    assert kube.core.read_namespaced_pod(job["status"]["podRef"]["name"], "default").spec.node_name == target


async def test_dry_run_changes_nothing_in_the_cluster(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    kube = start(kubesim_factory, cluster())
    before = {n: p.metadata.uid for n, p in web_pods(kube).items()}
    config = pipeline_config(kube.handle, nats_srv, redis_srv, test_id, dryRun=True)
    async with pipeline(config):
        create_job(kube, "pretend", sorted(before)[0])
        job = await until_job(kube, "pretend", ended)
    assert job["status"]["phase"] == "Succeeded" and "dry run" in job["status"]["message"]
    assert {n: p.metadata.uid for n, p in web_pods(kube).items()} == before
    assert reservations(kube) == []


@pytest.mark.parametrize("policy", ["Delete", "SoftEviction"])
async def test_delete_and_soft_eviction_policies(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str, policy: str
) -> None:
    kube = start(kubesim_factory, cluster())
    name = sorted(web_pods(kube))[0]
    config = pipeline_config(kube.handle, nats_srv, redis_srv, test_id, evictionPolicy=policy)
    async with pipeline(config):
        create_job(kube, "by-policy", name)
        if policy == "SoftEviction":
            # The pod is only annotated; whoever honours soft evictions deletes it (here: the test).
            record = await until_pod_annotated(kube, name, "scheduling.koordinator.sh/soft-eviction")
            # Koordinator's SoftEvictionSpec: who asked, when (as metav1.Time writes it), and why.
            spec = json.loads(record)
            assert set(spec) == {"timestamp", "initiator", "reason"}, spec
            assert spec["initiator"] == "podherd" and spec["reason"] == "migration job by-policy"
            assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", spec["timestamp"]), spec
            kube.core.delete_namespaced_pod(name, "default")
        job = await until_job(kube, "by-policy", ended)
    assert job["status"]["phase"] == "Succeeded"
    assert name not in web_pods(kube)


async def test_request_evict_only_pod_is_evicted_in_the_background(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    scenario = cluster(annotations={"descheduler.alpha.kubernetes.io/request-evict-only": ""})
    kube = start(kubesim_factory, scenario, evict_in_background=True)
    name = sorted(web_pods(kube))[0]
    config = pipeline_config(kube.handle, nats_srv, redis_srv, test_id)
    before = {outcome: evictions(outcome) for outcome in ("background", "blocked")}
    async with pipeline(config):
        create_job(kube, "background", name)
        job = await until_job(kube, "background", ended)
    assert job["status"]["phase"] == "Succeeded", job["status"]
    assert name not in web_pods(kube)
    # The webhook's wrapped 429 was taken for the evacuation it started, not for a refusal to retry.
    assert evictions("background") == before["background"] + 1
    assert evictions("blocked") == before["blocked"]


def evictions(outcome: str) -> float:
    """This process's executors' count of evictions with `outcome`."""
    labels = {"policy": "Eviction", "outcome": outcome}
    return REGISTRY.get_sample_value("podherd_evictions_total", labels) or 0.0


async def until_reservations_gone(kube: Kube, within: float = 10.0) -> None:
    if reservations(kube):
        await asyncio.to_thread(
            watch_until,
            kube.custom.list_cluster_custom_object,
            lambda state: not state,
            within,
            group=GROUP,
            version=VERSION,
            plural="reservations",
        )


async def until_pod_annotated(kube: Kube, name: str, key: str, within: float = 15.0) -> str:
    state = await asyncio.to_thread(
        watch_until,
        kube.core.list_namespaced_pod,
        lambda st: key in (st[f"default/{name}"].metadata.annotations or {}),
        within,
        namespace="default",
    )
    return str(state[f"default/{name}"].metadata.annotations[key])


@pytest.mark.parametrize("room", ["brief-room", "short-lived"])  # the second: the name Podherd would give
async def test_a_named_reservation_that_expires_before_it_is_used_fails_the_job_at_once(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str, room: str
) -> None:
    """A user's Reservation is the user's whatever its name, even the one Podherd would give its own."""
    from services.executor.reservations import reservation_for
    from shared.api.pmj import PodMigrationJob

    kube = start(kubesim_factory, cluster())
    tight_budget(kube, 3)  # the eviction waits, so the Reservation expires unused
    name = sorted(web_pods(kube))[0]
    pod = kube.api.sanitize_for_serialization(kube.core.read_namespaced_pod(name, "default"))
    brief = reservation_for(PodMigrationJob(), pod_from(pod), "3s")
    brief["metadata"] = {"name": room}
    kube.custom.create_cluster_custom_object(GROUP, VERSION, "reservations", brief)
    config = pipeline_config(kube.handle, nats_srv, redis_srv, test_id, watch=BLIND_TO_BUDGETS)
    async with pipeline(config):
        ref = {"reservationRef": {"name": room}}
        create_job(kube, "short-lived", name, ttl="60s", reservationOptions=ref)
        job = await until_job(kube, "short-lived", ended)
    assert (job["status"]["phase"], job["status"].get("reason")) == ("Failed", "ReservationExpired"), job
    assert name in web_pods(kube)  # never evicted


async def test_podherds_own_reservation_that_expires_while_the_eviction_waits_fails_the_job_at_once(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    kube = start(kubesim_factory, cluster())
    tight_budget(kube, 3)  # the eviction waits, so the Reservation expires unused
    name = sorted(web_pods(kube))[0]
    config = pipeline_config(kube.handle, nats_srv, redis_srv, test_id, watch=BLIND_TO_BUDGETS)
    async with pipeline(config):
        # The template's ttl is the Reservation's, shorter than the job's.
        create_job(kube, "brief", name, ttl="60s", reservationOptions={"template": {"spec": {"ttl": "3s"}}})
        job = await until_job(kube, "brief", ended)
    assert (job["status"]["phase"], job["status"].get("reason")) == ("Failed", "ReservationExpired"), job
    assert name in web_pods(kube)  # never evicted
