"""Surge through the four services: a Deployment that cannot lose its pod (one replica, a budget allowing
no disruption) moves without a moment at zero Ready pods, and a surge that meets an autoscaler or someone
else's scaling gives the Deployment back as it found it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import kubernetes
import nats
import pytest
import urllib3

from kubesim.sim import SimHandle
from podherd.client import signed
from podherd.harness.servers import Server
from shared.api import annotations as known
from shared.api import codec
from shared.api.messages import DrainIntent, DrainReply
from shared.api.names import ANNOTATION_STRATEGY, ANNOTATION_SURGE
from shared.config.model import PodherdConfig
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
    until_job,
)
from tests.e2e.test_lifecycle import cluster, reservations, start, until_no_reservations, web_pods
from tests.e2e.test_pipeline import when_served
from tests.kube import Kube, pod_ready, watch_until

pytestmark = [pytest.mark.e2e, pytest.mark.integration]
SURGE = {ANNOTATION_STRATEGY: "Surge"}
# What the executor's role grants for Surge alone: (service, verb, group, resource).
SURGE_GRANTS = {
    ("executor", "get", "apps", "replicasets"),
    ("executor", "get", "apps", "deployments"),
    ("executor", "patch", "apps", "deployments"),
    ("executor", "update", "apps", "deployments/scale"),
    ("executor", "list", "autoscaling", "horizontalpodautoscalers"),
}


def single(**extra: Any) -> dict[str, Any]:
    """One replica of web behind a PodDisruptionBudget that allows no disruption."""
    return cluster(web=1, pdb={"minAvailable": 1}, **extra)


class ReadyFloor:
    """The fewest Ready pods of an app seen from now on (a watch in a thread)."""

    def __init__(self, kube: Kube, app: str = "web", replicas: int = 1) -> None:
        self.kube, self.app, self.replicas = kube, app, replicas
        self.lowest, self.stop = 1_000, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        primed = [False]

        def seen(state: dict[str, Any]) -> bool:
            ready = sum(1 for p in state.values() if pod_ready(p) and p.metadata.deletion_timestamp is None)
            # A (re)started watch lists the pods one ADDED event at a time: count once they are all in.
            primed[0] = primed[0] or len(state) >= self.replicas
            if primed[0]:
                self.lowest = min(self.lowest, ready)
            return self.stop.is_set()

        while not self.stop.is_set():
            try:
                watch_until(
                    self.kube.core.list_namespaced_pod,
                    seen,
                    60,
                    namespace="default",
                    label_selector=f"app={self.app}",
                )
            except (urllib3.exceptions.ProtocolError, TimeoutError):
                primed[0] = False  # the watch ended early, or ran its course: list and follow again
            except urllib3.exceptions.HTTPError:
                if not self.stop.is_set():
                    raise
                return  # the cluster went away after the floor was read

    def close(self) -> int:
        self.stop.set()
        pods = self.kube.core.list_namespaced_pod("default", label_selector=f"app={self.app}").items
        self.kube.core.patch_namespaced_pod(  # an event for the watch to see the stop by
            pods[0].metadata.name, "default", {"metadata": {"labels": {"floor": "done"}}}
        )
        self.thread.join(30)
        return self.lowest


def watched_single(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> tuple[Kube, str, Any, PodherdConfig, ReadyFloor]:
    """The single replica's cluster, its pod (name, object), the pipeline's config, and a watch of how few
    of its pods are Ready from now on."""
    kube = start(kubesim_factory, single())
    ((name, old),) = web_pods(kube).items()
    return kube, name, old, pipeline_config(kube.handle, nats_srv, redis_srv, test_id), ReadyFloor(kube)


async def test_a_single_replica_behind_a_zero_budget_moves_by_surge_without_downtime(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    kube, name, old, config, floor = watched_single(kubesim_factory, nats_srv, redis_srv, test_id)
    async with pipeline(config):
        create_job(kube, "surge-1", name, annotations=SURGE)
        job = await until_job(kube, "surge-1", ended)
        await asyncio.to_thread(until_no_reservations, kube)
    assert floor.close() == 1  # never fewer than one Ready pod
    status = job["status"]
    assert status["phase"] == "Succeeded", status
    assert "by a surge" in status["message"]
    assert {k for k, (s, _) in conditions(job).items() if s == "True"} >= {
        "ReservationCreated",
        "ReservationScheduled",
        "PodBoundReservation",
        "BoundPodReady",
        "ReservationBound",
        "Eviction",
    }
    ((new_name, new),) = web_pods(kube).items()
    assert new_name == status["podRef"]["name"] != name
    assert new.spec.node_name == status["nodeName"] != old.spec.node_name
    assert known.RESERVATION_ALLOCATED in (new.metadata.annotations or {})
    deploy = kube.apps.read_namespaced_deployment("web", "default")
    assert deploy.spec.replicas == 1 and ANNOTATION_SURGE not in (deploy.metadata.annotations or {})
    assert reservations(kube) == []
    sim = kube.handle.sim
    assert sim is not None
    used = {(u.rpartition("-")[2], v, g, r) for u, v, g, r in sim.authorizer.used}
    assert used >= SURGE_GRANTS  # the executor's role grants Surge exactly what it uses


async def test_an_autoscaled_deployment_is_not_surged(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    kube = start(kubesim_factory, single())
    ((name, _),) = web_pods(kube).items()
    autoscaling: Any = kubernetes.client.AutoscalingV2Api(kube.api)
    autoscaling.create_namespaced_horizontal_pod_autoscaler(
        "default",
        {
            "metadata": {"name": "web"},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "maxReplicas": 3,
            },
        },
    )
    config = pipeline_config(kube.handle, nats_srv, redis_srv, test_id)
    async with pipeline(config):
        create_job(kube, "surge-hpa", name, annotations=SURGE)
        job = await until_job(kube, "surge-hpa", ended)
        await asyncio.to_thread(until_no_reservations, kube)
    assert (job["status"]["phase"], job["status"]["reason"]) == ("Failed", "SurgeFailed")
    assert "HorizontalPodAutoscaler default/web scales Deployment default/web" in job["status"]["message"]
    deploy = kube.apps.read_namespaced_deployment("web", "default")
    assert deploy.spec.replicas == 1 and ANNOTATION_SURGE not in (deploy.metadata.annotations or {})
    assert list(web_pods(kube)) == [name]


def slow_single(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> tuple[Kube, str, PodherdConfig]:
    """The single replica's cluster whose new pods are Ready only 3 s after they start (a surge waits for
    its pod that long), its pod's name, and the pipeline's config."""
    probe = {"tcpSocket": {"port": 80}, "initialDelaySeconds": 3}
    kube = start(kubesim_factory, single(readinessProbe=probe))
    ((name, _),) = web_pods(kube).items()
    return kube, name, pipeline_config(kube.handle, nats_srv, redis_srv, test_id)


async def test_a_deployment_scaled_by_someone_else_during_the_surge_is_handed_back(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    # The surge waits for its pod, and someone scales meanwhile.
    kube, name, config = slow_single(kubesim_factory, nats_srv, redis_srv, test_id)
    async with pipeline(config):
        create_job(kube, "surge-race", name, annotations=SURGE)
        await until_job(
            kube, "surge-race", lambda j: (j.get("status") or {}).get("reason") == "WaitForBoundPodReady"
        )
        kube.apps.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": 4}})
        job = await until_job(kube, "surge-race", ended)
        await asyncio.to_thread(until_no_reservations, kube)
    assert (job["status"]["phase"], job["status"]["reason"]) == ("Failed", "SurgeFailed")
    assert "was scaled to 4 by someone else during the surge" in job["status"]["message"]
    deploy = kube.apps.read_namespaced_deployment("web", "default")
    assert deploy.spec.replicas == 4 and ANNOTATION_SURGE not in (deploy.metadata.annotations or {})
    old = kube.core.read_namespaced_pod(name, "default")  # still there, no longer marked cheapest
    assert known.POD_DELETION_COST not in (old.metadata.annotations or {})


async def test_with_its_switch_on_a_single_replica_is_moved_by_surge_without_being_asked(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    kube = start(kubesim_factory, single())
    ((name, _),) = web_pods(kube).items()
    config = pipeline_config(
        kube.handle, nats_srv, redis_srv, test_id, surge={"singleReplicaDeployments": True}
    )
    async with pipeline(config):
        create_job(kube, "plain", name)
        job = await until_job(kube, "plain", ended)
        await asyncio.to_thread(until_no_reservations, kube)
    assert job["status"]["phase"] == "Succeeded", job["status"]
    assert "by a surge" in job["status"]["message"]
    assert job["metadata"]["annotations"][ANNOTATION_STRATEGY] == "Surge"  # the arbitrator's choice, kept
    assert kube.apps.read_namespaced_deployment("web", "default").spec.replicas == 1


async def test_a_drain_moves_a_single_replica_by_surge_without_downtime(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    kube, name, old, config, floor = watched_single(kubesim_factory, nats_srv, redis_srv, test_id)
    nc = await nats.connect(nats_srv.url)
    async with pipeline(config):
        intent = DrainIntent(kind="Drain", node=old.spec.node_name, requester="tests")
        answer = await when_served(nc, bus.Subjects(test_id), codec.encode(intent), signed(config))
        reply = codec.decode(answer, DrainReply)
        assert reply.ok and [m.pod for m in reply.moves] == [f"default/{name}"], reply
        job = await until_job(kube, reply.moves[0].job, ended)
        await asyncio.to_thread(until_no_reservations, kube)
    await nc.close()
    assert floor.close() == 1
    assert job["status"]["phase"] == "Succeeded" and "by a surge" in job["status"]["message"], job["status"]
    ((_, new),) = web_pods(kube).items()
    assert new.spec.node_name != old.spec.node_name
    assert kube.apps.read_namespaced_deployment("web", "default").spec.replicas == 1


async def test_a_surge_cut_short_after_the_scale_up_is_taken_back_once_by_another_executor(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    # The executor that scaled the Deployment up is killed, and the job is aborted once the surge's pod is
    # Ready, before any scale-down: another executor takes the surge back.
    kube, name, config = slow_single(kubesim_factory, nats_srv, redis_srv, test_id)
    counts: list[int] = []

    def scaled(state: dict[str, Any]) -> bool:
        replicas = state["default/web"].spec.replicas
        if not counts or counts[-1] != replicas:
            counts.append(replicas)
        return counts[-3:] == [1, 2, 1] and ANNOTATION_SURGE not in (
            state["default/web"].metadata.annotations or {}
        )

    following = asyncio.create_task(
        asyncio.to_thread(watch_until, kube.apps.list_namespaced_deployment, scaled, 60, namespace="default")
    )
    async with pipeline(config) as running:
        create_job(kube, "cut", name, annotations=SURGE)
        await until_job(
            kube, "cut", lambda j: (j.get("status") or {}).get("reason") == "WaitForBoundPodReady"
        )
        (executor,) = [r for r in running.running if r.name.startswith("executor")]
        await running.kill(executor)
        # Its pod Ready, the surge would now scale back and remove the old pod: the job ends first.
        await asyncio.to_thread(
            watch_until,
            kube.core.list_namespaced_pod,
            lambda pods: sum(pod_ready(p) for p in pods.values()) == 2,
            namespace="default",
            label_selector="app=web",
        )
        kube.custom.patch_cluster_custom_object(
            GROUP,
            VERSION,
            PLURAL,
            "cut",
            {"metadata": {"annotations": {"podherd.io/abort": "maintenance over"}}},
        )
        await running.start("executor", "r1")
        job = await until_job(kube, "cut", ended)
        await following
        await asyncio.to_thread(until_no_reservations, kube)
    assert job["status"]["phase"] == "Aborted"
    assert counts == [1, 2, 1]  # up once, back once, never further
    # Once the ReplicaSet has scaled down (its status counts the pods that stay), the one it kept:
    await asyncio.to_thread(
        watch_until,
        kube.apps.list_namespaced_replica_set,
        lambda sets: all(
            rs.spec.replicas == rs.status.replicas == 1
            and rs.status.observed_generation == rs.metadata.generation
            for rs in sets.values()
        ),
        namespace="default",
    )
    staying = [p for p in web_pods(kube).values() if p.metadata.deletion_timestamp is None]
    assert [p.metadata.name for p in staying] == [name]  # the old pod: the job moved nothing
    assert known.POD_DELETION_COST not in (staying[0].metadata.annotations or {})
