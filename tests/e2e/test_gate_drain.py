"""`kubectl drain` (the real one, unchanged) of a node whose pods are opted in to evacuation, through the five
services: every eviction kubectl asks for becomes a migration (room first, or a surge where the workload
cannot spare a pod), kubectl retries until the pod is gone and exits 0, and the watchdog, from every pod,
Reservation and job event, finds no eviction without room and no workload below what its budget allows. A
descheduler's eviction in the background (KEP-1397) is moved the same way. Gate replicas killed during the
drain lose answers, never a pod's room: kubectl is told the webhook failed and, run again, finds each pod's
one job."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import redis.asyncio as aioredis

from kubesim.sim import SimHandle
from podherd.harness.gate import Gate, start_gate
from podherd.harness.servers import Server
from podherd.watchdog.history import room_checks
from podherd.watchdog.invariants import Findings, Watchdog
from services.gate.evacuation import OPT_IN, job_name
from services.gate.evacuation import TRIGGERED as EVICTION_IN_BACKGROUND
from shared.api.names import ANNOTATION_REQUESTER
from shared.kube.client import KubeClient
from tests.e2e.pipeline import GROUP, PLURAL, VERSION, ended, pipeline, pipeline_config, until_job
from tests.e2e.test_drain import agent, workload
from tests.e2e.test_lifecycle import start, until_no_reservations
from tests.e2e.test_surge import ReadyFloor
from tests.kube import Kube, refusal, watch_until
from tests.kubesim.test_kubectl import KUBECTL

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.integration,
    pytest.mark.kubectl,
    pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH"),
]
NODE = "node-1"
CLUSTER = {
    "name": "interceptor",
    "nodes": [{"name": "node-{i}", "count": 3, "capacity": {"cpu": "8", "memory": "16Gi", "pods": "110"}}],
    "workloads": [
        workload("solo", 1, [NODE], pdb={"maxUnavailable": 0}),
        workload("web", 3, [NODE, "node-2", "node-3"], pdb={"minAvailable": 2}),
        workload("db", 2, [NODE, "node-2"], kind="StatefulSet"),
    ],
}
# What each workload may never go below: its replicas where it moves by surge, else what its budget keeps.
FLOORS = {"solo": 1, "web": 2}


def evict_in_background(kube: Kube, namespace: str, name: str, within: float = 60.0) -> str:
    """A descheduler evicting as KEP-1397 has it: an eviction answered 429 with "Eviction triggered
    evacuation" is an eviction in the background, and the pod (this one: its uid) is followed until it is
    gone. Returns how it went."""
    uid = kube.core.read_namespaced_pod(name, namespace).metadata.uid
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}
    try:
        kube.core.create_namespaced_pod_eviction(name, namespace, body)
        return "evicted"
    except kubernetes.client.ApiException as exc:
        if exc.status != 429 or EVICTION_IN_BACKGROUND not in str(refusal(exc).get("message")):
            raise
    watch_until(
        kube.core.list_namespaced_pod,
        lambda pods: all(p.metadata.uid != uid for p in pods.values()),
        within,
        namespace=namespace,
    )
    return "evicted in the background"


@dataclass
class Drained:
    """A cluster with opted-in pods on NODE, the gate and the four services before it, and a watchdog."""

    kube: Kube
    gate: Gate
    on_node: dict[str, str]  # pod name -> uid, the pods to move
    floors: dict[str, ReadyFloor]
    findings: list[Findings] = field(default_factory=list)  # the watchdog's, once the run is over


@dataclass
class Stack:
    """The cluster (CLUSTER on kubesim) and the servers a run uses."""

    kube: Kube
    nats: Server
    redis: Server
    test_id: str
    tmp: Path


@pytest.fixture
def stack(
    kubesim_factory: Callable[..., SimHandle],
    nats_srv: Server,
    redis_srv: Server,
    test_id: str,
    tmp_path: Path,
) -> Stack:
    return Stack(start(kubesim_factory, CLUSTER), nats_srv, redis_srv, test_id, tmp_path)


@contextlib.asynccontextmanager
async def gated_drain(stack: Stack, *, gates: int = 1) -> AsyncIterator[Drained]:
    kube, nats_srv, redis_srv, test_id, tmp_path = (
        stack.kube,
        stack.nats,
        stack.redis,
        stack.test_id,
        stack.tmp,
    )
    kube.core.patch_namespace("default", {"metadata": {"labels": {OPT_IN: "true"}}})
    await asyncio.to_thread(agent, kube)
    on_node = {
        p.metadata.name: p.metadata.uid
        for p in kube.core.list_namespaced_pod("default", field_selector=f"spec.nodeName={NODE}").items
        if p.metadata.labels.get("app") != "agent"
    }
    assert len(on_node) == 3
    surge = {"singleReplicaDeployments": True, "zeroDisruptionDeployments": True}
    gate = await asyncio.to_thread(
        start_gate, kube.handle, tmp_path, replicas=gates, arguments={"surge": surge}
    )
    floors = {app: ReadyFloor(kube, app, replicas) for app, replicas in (("solo", 1), ("web", 3))}
    config = pipeline_config(kube.handle, nats_srv, redis_srv, test_id, surge=surge)
    watched = KubeClient.from_config(config.kubernetes)
    redis = aioredis.from_url(config.redis.url)
    watchdog = Watchdog(
        watched,
        redis,
        test_id,
        args=config.migration_controller,
        checks=lambda: room_checks(nats_srv.url, test_id),
    )
    stop = asyncio.Event()
    watching = asyncio.create_task(watchdog.run(stop))
    drained = Drained(kube, gate, on_node, floors)
    try:
        async with pipeline(config):
            yield drained
    finally:
        stop.set()
        drained.findings.append(await watching)
        gate.processes.stop_all()
        await watched.aclose()
        await redis.aclose()


async def kubectl_drain(kube: Kube, node: str = NODE) -> tuple[int, str]:
    drain = await asyncio.create_subprocess_exec(
        KUBECTL or "kubectl", "--kubeconfig", str(kube.handle.kubeconfig),
        "drain", node, "--ignore-daemonsets", "--timeout=60s",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    output = (await drain.communicate())[0].decode()
    return drain.returncode or 0, output


async def moved(drained: Drained) -> dict[str, dict[str, Any]]:
    """Each pod's job, once ended."""
    return {
        name: await until_job(drained.kube, job_name(uid), ended, within=60)
        for name, uid in drained.on_node.items()
    }


def assert_moved_with_room(drained: Drained, jobs: dict[str, dict[str, Any]]) -> None:
    """Every job Succeeded (the solo pod's by a surge), no eviction without room, no workload below its
    floor, nothing but the DaemonSet's pod left on the node."""
    phases = {name: (j["status"]["phase"], j["status"].get("message")) for name, j in jobs.items()}
    assert {phase for phase, _ in phases.values()} == {"Succeeded"}, phases
    solo = next(name for name in jobs if name.startswith("solo-"))
    assert "by a surge" in phases[solo][1], phases
    for job in jobs.values():
        assert job["metadata"]["annotations"][ANNOTATION_REQUESTER] == "kubernetes-admin"
    (findings,) = drained.findings
    breaches = (
        findings.slot_breaches,
        findings.workload_breaches,
        findings.pdb_breaches,
        findings.surge_breaches,
    )
    assert findings.evictions_without_room == [] and findings.limits_exceeded == 0, breaches
    assert findings.succeeded_before_gone == []
    lowest = {app: floor.close() for app, floor in drained.floors.items()}
    assert all(lowest[app] >= FLOORS[app] for app in FLOORS), lowest
    kube = drained.kube
    left: list[Any] = kube.core.list_namespaced_pod("default", field_selector=f"spec.nodeName={NODE}").items
    assert [p.metadata.labels.get("app") for p in left] == ["agent"]


async def test_kubectl_drain_of_opted_in_pods_is_a_migration_kubectl_waits_out(stack: Stack) -> None:
    kube = stack.kube
    async with gated_drain(stack) as drained:
        code, output = await kubectl_drain(kube)
        assert code == 0, output
        jobs = await moved(drained)
        web = next(
            p.metadata
            for p in kube.core.list_namespaced_pod("default", label_selector="app=web").items
            if p.spec.node_name != NODE
        )
        how = await asyncio.to_thread(evict_in_background, kube, "default", web.name)
        background = await until_job(kube, job_name(web.uid), ended, within=60)
        # Right after, as the same admin: a drain of the node the StatefulSet's pod moved to. Its eviction
        # of db-0 is no retry of the first drain's: the pod moves again, and that drain ends with it gone.
        landed = kube.core.read_namespaced_pod("db-0", "default")
        second_code, second = await kubectl_drain(kube, landed.spec.node_name)
        again = await until_job(kube, job_name(landed.metadata.uid), ended, within=60)
        await asyncio.to_thread(until_no_reservations, kube)
    assert f"node/{NODE} drained" in output and "Eviction triggered evacuation" in output, output
    assert how == "evicted in the background" and background["status"]["phase"] == "Succeeded", background
    assert_moved_with_room(drained, jobs)
    assert second_code == 0 and f"node/{landed.spec.node_name} drained" in second, second
    assert again["status"]["phase"] == "Succeeded", again
    now = kube.core.read_namespaced_pod("db-0", "default")
    assert now.metadata.uid != landed.metadata.uid and now.spec.node_name not in (NODE, landed.spec.node_name)
    made = kube.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)["items"]
    assert job_name(web.uid) in {j["metadata"]["name"] for j in made}


def then_kill(gate: Gate, count: int | None = None) -> Callable[[asyncio.Future[None]], None]:
    """Kill `count` replicas (all by default) the moment what was awaited happens: on the loop, at once."""

    def kill(done: asyncio.Future[None]) -> None:
        if not done.cancelled() and done.exception() is None:
            gate.kill(count)

    return kill


def succeeded(job: dict[str, Any]) -> bool:
    return bool((job.get("status") or {}).get("phase") == "Succeeded")


def until_jobs(kube: Kube, enough: Callable[[list[dict[str, Any]]], bool]) -> None:
    watch_until(
        kube.custom.list_cluster_custom_object,
        lambda jobs: enough(list(jobs.values())),
        60,
        group=GROUP,
        version=VERSION,
        plural=PLURAL,
    )


@pytest.mark.full
async def test_gate_replicas_killed_mid_drain_lose_answers_never_a_pods_room(stack: Stack) -> None:
    """Both replicas SIGKILLed as the first job is made (mid-answer: kubectl's evictions run at once), then,
    once they are back, one killed again as the first pod has moved, its address left in the Service."""
    kube = stack.kube
    async with gated_drain(stack, gates=2) as drained:
        gate = drained.gate
        first_job = asyncio.create_task(asyncio.to_thread(until_jobs, kube, lambda jobs: len(jobs) > 0))
        first_job.add_done_callback(then_kill(gate))
        runs = [await kubectl_drain(kube)]
        await first_job
        await asyncio.to_thread(gate.replace, kube.handle, 2)
        one_moved = asyncio.create_task(
            asyncio.to_thread(until_jobs, kube, lambda jobs: any(succeeded(j) for j in jobs))
        )
        one_moved.add_done_callback(then_kill(gate, 1))
        while runs[-1][0] != 0 and len(runs) < 5:
            if one_moved.done() and len([r for r in gate.replicas if r.alive()]) < 2:
                await asyncio.to_thread(gate.replace, kube.handle, 1)  # as its Deployment would
            runs.append(await kubectl_drain(kube))
        await one_moved
        jobs = await moved(drained)
        await asyncio.to_thread(until_no_reservations, kube)
    codes = [code for code, _ in runs]
    assert codes[0] != 0 and codes[-1] == 0, runs
    failed_closed = 'failed calling webhook "evictions-in-namespaces.gate.podherd.io"'
    assert failed_closed in runs[0][1], runs[0][1]
    assert_moved_with_room(drained, jobs)
    made = kube.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)["items"]
    assert sorted(j["spec"]["podRef"]["uid"] for j in made) == sorted(drained.on_node.values())
