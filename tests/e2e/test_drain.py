"""A node drain through the four services, with everything a real node holds: a single-replica Deployment
and one whose budget allows no disruption (moved by Surge, never below their replicas), a StatefulSet's pod,
a pod with an emptyDir, a bare pod, and a DaemonSet's pod (which stays)."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import nats
import pytest
import redis.asyncio as aioredis
import yaml

from kubesim.sim import SimHandle
from podherd.client import signed
from podherd.harness.servers import Server
from podherd.watchdog.invariants import Watchdog
from shared.api import codec
from shared.api.drain import DrainOptions
from shared.api.messages import DrainIntent, DrainReply
from shared.api.names import ANNOTATION_NODE_DRAIN
from shared.kube.client import KubeClient
from shared.nats import bus
from tests.e2e.pipeline import (
    GROUP,
    PLURAL,
    VERSION,
    audit_order,
    ended,
    pipeline,
    pipeline_config,
    podherd,
    until_job,
)
from tests.e2e.test_lifecycle import cluster, start, until_no_reservations, web_pods
from tests.e2e.test_pipeline import when_served
from tests.e2e.test_surge import ReadyFloor
from tests.kube import Kube, pod_ready, watch_until

pytestmark = [pytest.mark.e2e, pytest.mark.integration]
NODE = "node-1"


def workload(name: str, replicas: int, placement: list[str], **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "replicas": replicas,
        "requests": {"cpu": "500m", "memory": "256Mi"},
        "schedulerName": "koord-scheduler",
        "placement": placement,
        **extra,
    }


CLUSTER = {
    "name": "maintenance",
    "nodes": [{"name": "node-{i}", "count": 3, "capacity": {"cpu": "8", "memory": "16Gi", "pods": "110"}}],
    "workloads": [
        workload("solo", 1, [NODE]),
        workload("guarded", 2, [NODE, "node-2"], pdb={"minAvailable": 2}),
        workload("db", 2, [NODE, "node-2"], kind="StatefulSet"),
        workload("scratch", 2, [NODE, "node-3"], volumes=[{"name": "tmp", "emptyDir": {}}]),
    ],
    "pods": [{"name": "bare", "namespace": "default", "node": NODE, "requests": {"cpu": "100m"}}],
}


def agent(kube: Kube) -> None:
    template = {
        "metadata": {"labels": {"app": "agent"}},
        "spec": {"containers": [{"name": "a", "image": "a"}]},
    }
    kube.apps.create_namespaced_daemon_set(
        "default",
        {
            "metadata": {"name": "agent"},
            "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": template},
        },
    )
    watch_until(
        kube.core.list_namespaced_pod,
        lambda s: len(s) == 3 and all(pod_ready(p) for p in s.values()),
        namespace="default",
        label_selector="app=agent",
    )


async def test_a_drain_empties_the_node_keeping_every_workload_up(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    kube = start(kubesim_factory, CLUSTER)
    await asyncio.to_thread(agent, kube)
    floors = {app: ReadyFloor(kube, app, replicas) for app, replicas in (("solo", 1), ("guarded", 2))}
    config = pipeline_config(kube.handle, nats_srv, redis_srv, test_id)
    options = DrainOptions(ignore_daemonsets=True, delete_emptydir_data=True, force=True)
    intent = DrainIntent(kind="Drain", node=NODE, requester="tests", options=options)
    nc = await nats.connect(nats_srv.url)
    watched = KubeClient.from_config(config.kubernetes)
    redis = aioredis.from_url(config.redis.url)
    watchdog = Watchdog(watched, redis, test_id, args=config.migration_controller)
    stop = asyncio.Event()
    watching = asyncio.create_task(watchdog.run(stop))
    async with pipeline(config):
        answer = await when_served(nc, bus.Subjects(test_id), codec.encode(intent), signed(config))
        reply = codec.decode(answer, DrainReply)
        assert reply.ok, reply
        jobs = {
            m.pod.split("/")[1].rsplit("-", 2)[0] if m.pod != "default/bare" else "bare": m
            for m in reply.moves
        }
        ended_jobs = {name: await until_job(kube, move.job, ended, within=60) for name, move in jobs.items()}
        await asyncio.to_thread(until_no_reservations, kube)
    await nc.close()
    stop.set()
    findings = await watching
    await watched.aclose()
    await redis.aclose()
    # From every pod and Deployment event: both surges watched, neither below its Ready count.
    assert findings.surges_watched == 2 and findings.surge_breaches == []
    assert {p.split("/")[1].split("-")[0] for p in reply.stays} == {"agent"}
    phases = {name: (j["status"]["phase"], j["status"]["message"]) for name, j in ended_jobs.items()}
    assert {name: phase for name, (phase, _) in phases.items()} == dict.fromkeys(
        ("solo", "guarded", "db", "scratch", "bare"), "Succeeded"
    ), phases
    for surged in ("solo", "guarded"):
        assert "by a surge" in phases[surged][1], phases
    assert {m.mode for m in reply.moves if m.pod == "default/bare"} == {"EvictDirectly"}
    assert floors["solo"].close() == 1 and floors["guarded"].close() == 2  # never below their replicas
    left = kube.core.list_namespaced_pod("default", field_selector=f"spec.nodeName={NODE}").items
    assert [p.metadata.labels.get("app") for p in left] == ["agent"]
    assert kube.core.read_node(NODE).spec.unschedulable
    replicas = {
        d.metadata.name: d.spec.replicas for d in kube.apps.list_namespaced_deployment("default").items
    }
    assert replicas == {"solo": 1, "guarded": 2, "scratch": 2}


async def test_a_drain_whose_cli_and_services_are_killed_is_resumed_by_running_it_again(
    kubesim_factory: Callable[..., SimHandle],
    nats_srv: Server,
    redis_srv: Server,
    test_id: str,
    tmp_path: Path,
) -> None:
    kube = start(kubesim_factory, cluster(nodes=3, web=6, node_cpu=8))
    node = "node-1"
    on_node = {n for n, p in web_pods(kube).items() if p.spec.node_name == node}
    config = pipeline_config(kube.handle, nats_srv, redis_srv, test_id)
    config_path = tmp_path / "podherd.yaml"
    config_path.write_text(yaml.safe_dump(msgspec.to_builtins(config)))
    argv = [sys.executable, "-m", "podherd", "drain", node, "--timeout", "2m", "--config", str(config_path)]
    async with pipeline(config) as running:
        cli = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
        )
        # Killed as soon as the node records its drain: the CLI and every service, mid-drain.
        await asyncio.to_thread(
            watch_until,
            kube.core.list_node,
            lambda nodes: ANNOTATION_NODE_DRAIN in (nodes[f"/{node}"].metadata.annotations or {}),
            30,
        )
        cli.send_signal(signal.SIGKILL)
        await cli.wait()
        for service in list(running.running):
            await running.kill(service)
        for name in ("watcher", "arbitrator", "executor", "tracker"):
            await running.start(name, "r1")
        again = await asyncio.to_thread(podherd, config_path, "drain", node, "--timeout", "2m", timeout=150)
        # A drain kubectl would refuse: refused whole, naming the pod, and the node left as it was.
        bare = {
            "metadata": {"name": "bare"},
            "spec": {"nodeName": "node-2", "containers": [{"name": "c", "image": "i"}]},
        }
        kube.core.create_namespaced_pod("default", bare)
        refused = await asyncio.to_thread(podherd, config_path, "drain", "node-2")
        await asyncio.to_thread(until_no_reservations, kube)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert (
        "error: cannot delete Pods that declare no controller (use --force to override): default/bare"
        in refused.stderr
    )
    assert not kube.core.read_node("node-2").spec.unschedulable
    assert again.returncode == 0, again.stdout + again.stderr
    assert (
        f"{len(on_node)} of {len(on_node)} pods moved" in again.stdout
        and f"node/{node} drained" in again.stdout
    )
    record = json.loads(kube.core.read_node(node).metadata.annotations[ANNOTATION_NODE_DRAIN])
    assert len(record["jobs"]) == len(on_node)  # the same jobs, not new ones
    jobs = kube.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)["items"]
    assert sorted(j["metadata"]["name"] for j in jobs) == sorted(record["jobs"])
    assert {j["status"]["phase"] for j in jobs} == {"Succeeded"}
    assert not on_node & set(web_pods(kube))


FULL = {
    "name": "full",
    "nodes": [{"name": "node-{i}", "count": 3, "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"}}],
    "workloads": [
        # node-1: big (3 CPUs) and small; node-2: big and small; node-3: filler. Half a CPU free elsewhere:
        # room for small, none for big.
        {**workload("big", 2, [NODE, "node-2"]), "requests": {"cpu": "3", "memory": "1Gi"}},
        {**workload("small", 2, [NODE, "node-2"]), "requests": {"cpu": "500m", "memory": "256Mi"}},
        {**workload("filler", 1, ["node-3"]), "requests": {"cpu": "3500m", "memory": "1Gi"}},
    ],
}


def drain_phase(node: Any) -> str | None:
    text = (node.metadata.annotations or {}).get(ANNOTATION_NODE_DRAIN)
    phase: str | None = json.loads(text).get("phase") if text else None
    return phase


async def test_an_atomic_drain_without_room_for_every_pod_evicts_nothing_then_moves_all_once_there_is(
    kubesim_factory: Callable[..., SimHandle],
    nats_srv: Server,
    redis_srv: Server,
    test_id: str,
    tmp_path: Path,
) -> None:
    kube = start(kubesim_factory, FULL)
    before = {p.metadata.name: p.metadata.uid for p in kube.core.list_namespaced_pod("default").items}
    on_node = {
        p.metadata.name for p in kube.core.list_namespaced_pod("default").items if p.spec.node_name == NODE
    }
    config = pipeline_config(kube.handle, nats_srv, redis_srv, test_id)
    config_path = tmp_path / "podherd.yaml"
    config_path.write_text(yaml.safe_dump(msgspec.to_builtins(config)))
    argv = [sys.executable, "-m", "podherd", "drain", NODE, "--atomic", "--timeout", "4s"]
    async with pipeline(config):
        # The CLI killed while room is being reserved: the services roll the drain back by themselves.
        cli = await asyncio.create_subprocess_exec(
            *argv,
            "--config",
            str(config_path),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        await asyncio.to_thread(
            watch_until, kube.core.list_node, lambda nodes: drain_phase(nodes[f"/{NODE}"]) == "Reserving", 30
        )
        cli.send_signal(signal.SIGKILL)
        await cli.wait()
        await asyncio.to_thread(
            watch_until, kube.core.list_node, lambda nodes: drain_phase(nodes[f"/{NODE}"]) == "RolledBack", 30
        )
        await asyncio.to_thread(until_no_reservations, kube)
        killed = {p.metadata.name: p.metadata.uid for p in kube.core.list_namespaced_pod("default").items}
        assert killed == before and not kube.core.read_node(NODE).spec.unschedulable
        # Through the CLI to the end: the pods without room named.
        short = await asyncio.to_thread(podherd, config_path, "drain", NODE, "--atomic", "--timeout", "6s")
        await asyncio.to_thread(until_no_reservations, kube)
        record = json.loads(kube.core.read_node(NODE).metadata.annotations[ANNOTATION_NODE_DRAIN])
        rolled_back = kube.core.read_node(NODE).spec.unschedulable
        after = {p.metadata.name: p.metadata.uid for p in kube.core.list_namespaced_pod("default").items}
        jobs = kube.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)["items"]
        # Room freed: the same drain, sent again, starts anew and moves every pod.
        kube.apps.delete_namespaced_deployment("filler", "default")
        again = await asyncio.to_thread(podherd, config_path, "drain", NODE, "--atomic", "--timeout", "60s")
        await asyncio.to_thread(until_no_reservations, kube)
    (big,) = (name for name in on_node if name.startswith("big"))
    assert short.returncode == 1, short.stdout + short.stderr
    assert f"error: no room for default/{big}: " in short.stderr, short.stderr
    assert f"node/{NODE} uncordoned; every Reservation released; no pod was evicted" in short.stderr
    assert (record["phase"], [line.split(":")[0] for line in record["noRoom"]]) == (
        "RolledBack",
        [f"default/{big}"],
    )
    assert not rolled_back
    assert after == before  # nothing evicted
    assert {j["status"]["phase"] for j in jobs} == {"Aborted"} and len(jobs) == len(on_node)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"{len(on_node)} of {len(on_node)} pods moved" in again.stdout
    left = kube.core.list_namespaced_pod("default", field_selector=f"spec.nodeName={NODE}").items
    assert left == [] and kube.core.read_node(NODE).spec.unschedulable
    # Room was reserved for every pod before any job of the second drain was admitted.
    records = await audit_order(nats_srv.url, bus.Subjects(test_id))
    moving = next(
        i for i, r in enumerate(records) if r.action == "drain" and r.details.get("phase") == "Moving"
    )
    jobs_now = {
        j["metadata"]["name"] for j in kube.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)["items"]
    }
    running: dict[str, int] = {}
    for i, r in enumerate(records):
        if r.job in jobs_now and r.action == "transition" and r.phase == "Running":
            running.setdefault(r.job or "", i)
    assert len(running) == len(on_node) and moving < min(running.values())
