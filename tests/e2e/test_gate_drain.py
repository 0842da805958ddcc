"""`kubectl drain` (the real one, unchanged) of a node whose pods are opted in to evacuation, through the five
services: every eviction kubectl asks for becomes a migration (room first, or a surge where the workload
cannot spare a pod), kubectl retries until the pod is gone and exits 0, and the watchdog, from every pod,
Reservation and job event, finds no eviction without room and no workload below what its budget allows. A
descheduler's eviction in the background (KEP-1397) is moved the same way."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import redis.asyncio as aioredis

from kubesim.sim import SimHandle
from podherd.harness.gate import start_gate
from podherd.harness.servers import Server
from podherd.watchdog.history import room_checks
from podherd.watchdog.invariants import Watchdog
from services.gate.evacuation import OPT_IN, job_name
from services.gate.evacuation import TRIGGERED as EVICTION_IN_BACKGROUND
from shared.api.names import ANNOTATION_REQUESTER
from shared.kube import KubeClient
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


async def test_kubectl_drain_of_opted_in_pods_is_a_migration_kubectl_waits_out(
    kubesim_factory: Callable[..., SimHandle],
    nats_srv: Server,
    redis_srv: Server,
    test_id: str,
    tmp_path: Path,
) -> None:
    kube = start(kubesim_factory, CLUSTER)
    kube.core.patch_namespace("default", {"metadata": {"labels": {OPT_IN: "true"}}})
    await asyncio.to_thread(agent, kube)
    on_node = {
        p.metadata.name: p.metadata.uid
        for p in kube.core.list_namespaced_pod("default", field_selector=f"spec.nodeName={NODE}").items
        if p.metadata.labels.get("app") != "agent"
    }
    assert len(on_node) == 3
    gate = await asyncio.to_thread(start_gate, kube.handle, tmp_path)
    floors = {app: ReadyFloor(kube, app, replicas) for app, replicas in (("solo", 1), ("web", 3))}
    config = pipeline_config(
        kube.handle,
        nats_srv,
        redis_srv,
        test_id,
        surge={"singleReplicaDeployments": True, "zeroDisruptionDeployments": True},
    )
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
    try:
        async with pipeline(config):
            drain = await asyncio.create_subprocess_exec(
                KUBECTL or "kubectl", "--kubeconfig", str(kube.handle.kubeconfig),
                "drain", NODE, "--ignore-daemonsets", "--timeout=60s",
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            )  # fmt: skip
            output = (await drain.communicate())[0].decode()
            assert drain.returncode == 0, output
            jobs = {
                name: await until_job(kube, job_name(uid), ended, within=60) for name, uid in on_node.items()
            }
            web = next(
                p.metadata
                for p in kube.core.list_namespaced_pod("default", label_selector="app=web").items
                if p.spec.node_name != NODE
            )
            how = await asyncio.to_thread(evict_in_background, kube, "default", web.name)
            background = await until_job(kube, job_name(web.uid), ended, within=60)
            await asyncio.to_thread(until_no_reservations, kube)
    finally:
        stop.set()
        findings = await watching
        gate.processes.stop_all()
        await watched.aclose()
        await redis.aclose()
    assert f"node/{NODE} drained" in output and "Eviction triggered evacuation" in output, output
    phases = {name: (j["status"]["phase"], j["status"].get("message")) for name, j in jobs.items()}
    assert {phase for phase, _ in phases.values()} == {"Succeeded"}, phases
    assert how == "evicted in the background" and background["status"]["phase"] == "Succeeded", background
    solo = next(name for name in jobs if name.startswith("solo-"))
    assert "by a surge" in phases[solo][1], phases
    for job in jobs.values():
        assert job["metadata"]["annotations"][ANNOTATION_REQUESTER] == "kubernetes-admin"
    breaches = (
        findings.slot_breaches,
        findings.workload_breaches,
        findings.pdb_breaches,
        findings.surge_breaches,
    )
    assert findings.evictions_without_room == [] and findings.limits_exceeded == 0, breaches
    assert findings.succeeded_before_gone == []
    lowest = {app: floor.close() for app, floor in floors.items()}
    assert all(lowest[app] >= FLOORS[app] for app in FLOORS), lowest
    left: list[Any] = kube.core.list_namespaced_pod("default", field_selector=f"spec.nodeName={NODE}").items
    assert [p.metadata.labels.get("app") for p in left] == ["agent"]
    assert len(kube.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)["items"]) == len(on_node) + 1
