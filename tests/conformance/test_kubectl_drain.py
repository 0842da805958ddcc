"""`kubectl drain` (the engine's own kubectl, unchanged) of a node whose pods are opted in to evacuation, on
either engine: the API server's admission chain hands each eviction to the gate, every one becomes a
migration (room first; a surge for the workload that cannot spare its pod), kubectl retries until each pod
is gone and says the node drained, and the watchdog finds no eviction without room."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from podherd.demo.engines import kubectl_for
from podherd.harness.servers import Server
from services.gate.evacuation import OPT_IN, job_name
from tests.conformance.conftest import Scoped, gate_before
from tests.conformance.test_drains import spread
from tests.conformance.test_migrations import app_pods, until_no_reservations
from tests.conformance.watched import watched
from tests.e2e.pipeline import ended, pipeline_config, until_job

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.kubectl]


def interceptor_cluster() -> dict[str, Any]:
    """`web` and `api` spread over three nodes; `solo`, one replica behind a zero budget, on node-1."""
    document = spread("web")
    document["workloads"][0]["pdb"] = {"minAvailable": 2}
    solo = {**document["workloads"][0], "name": "solo", "replicas": 1, "placement": ["node-1"]}
    solo["pdb"] = {"maxUnavailable": 0}
    document["workloads"].append(solo)
    return document


async def test_kubectl_drain_through_the_gate_moves_each_pod_into_room_and_ends_drained(
    engine_cluster: Callable[[dict[str, Any]], Scoped],
    nats_srv: Server,
    redis_srv: Server,
    test_id: str,
    tmp_path: Path,
) -> None:
    c = engine_cluster(interceptor_cluster())
    node = f"{c.scope}-node-1"
    c.kube.core.patch_namespace(c.namespace, {"metadata": {"labels": {OPT_IN: "true"}}})
    on_node = {
        p.metadata.name: p.metadata.uid
        for app in ("web", "solo")
        for p in app_pods(c, app).values()
        if p.spec.node_name == node
    }
    assert len(on_node) == 2
    surge = {"singleReplicaDeployments": True}
    config = pipeline_config(c.kube.handle, nats_srv, redis_srv, test_id, surge=surge)
    kubeconfig = str(c.kube.handle.kubeconfig)
    argv = [kubectl_for(c.engine), "--kubeconfig", kubeconfig, "drain", node, "--ignore-daemonsets"]
    with gate_before(c, tmp_path, {"surge": surge}):
        async with watched(config):
            drain = await asyncio.create_subprocess_exec(
                *argv, "--timeout=90s", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
            )
            output = (await drain.communicate())[0].decode()
            jobs = {
                name: await until_job(c.kube, job_name(uid), ended, within=60)
                for name, uid in on_node.items()
            }
            await until_no_reservations(c)
    assert drain.returncode == 0, output
    assert f"node/{node} drained" in output and "Eviction triggered evacuation" in output, output
    phases = {name: (j["status"]["phase"], j["status"].get("message", "")) for name, j in jobs.items()}
    assert {phase for phase, _ in phases.values()} == {"Succeeded"}, phases
    solo = next(name for name in phases if name.startswith("solo-"))
    assert "by a surge" in phases[solo][1], phases
    left = [
        p.metadata.name
        for app in ("web", "solo")
        for p in app_pods(c, app).values()
        if p.spec.node_name == node
    ]
    assert left == []
    assert len(app_pods(c, "web")) == 3 and len(app_pods(c, "solo")) == 1
