"""Pods of workload kinds beyond Deployments, ReplicaSets and StatefulSets, through the four services on
kubesim: a ReplicationController (a default workload kind) is read through its /scale, as the watcher's
own role allows, and its pods are held to its workload limits."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import nats
import pytest

from kubesim.sim import SimHandle
from podherd.harness.servers import Server
from shared.nats import bus
from tests.e2e.pipeline import create_job, pipeline, pipeline_config, until_job
from tests.e2e.test_lifecycle import cluster, start, unavailable_deferral, waiting_for_replacement
from tests.kube import pod_ready, watch_until

pytestmark = [pytest.mark.e2e, pytest.mark.integration]


def replication_controller(replicas: int, probe: dict[str, Any]) -> dict[str, Any]:
    container = {
        "name": "c",
        "image": "i",
        "resources": {"requests": {"cpu": "100m"}},
        "readinessProbe": probe,
    }
    return {
        "apiVersion": "v1",
        "kind": "ReplicationController",
        "metadata": {"name": "legacy"},
        "spec": {
            "replicas": replicas,
            "selector": {"app": "legacy"},
            "template": {
                "metadata": {"labels": {"app": "legacy"}},
                "spec": {"schedulerName": "koord-scheduler", "containers": [container]},
            },
        },
    }


async def test_a_replication_controllers_pods_are_held_to_its_workload_limits(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    # 3 replicas: maxUnavailablePerWorkload is 1 by default. The first replicas are Ready at once; their
    # replacements only after ten minutes, so the first moved pod's stays not Ready for the whole test.
    kube = start(kubesim_factory, cluster(nodes=3, web=0))
    probe = {"tcpSocket": {"port": 80}, "initialDelaySeconds": 0}
    kube.core.create_namespaced_replication_controller("default", replication_controller(3, probe))
    listed = await asyncio.to_thread(
        watch_until,
        kube.core.list_namespaced_pod,
        lambda pods: len(pods) == 3 and all(pod_ready(p) for p in pods.values()),
        namespace="default",
        label_selector="app=legacy",
    )
    first, second = sorted(key.rsplit("/", 1)[-1] for key in listed)[:2]
    later = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [{"name": "c", "readinessProbe": {**probe, "initialDelaySeconds": 600}}]
                }
            }
        }
    }
    kube.core.patch_namespaced_replication_controller("legacy", "default", later)
    config = pipeline_config(kube.handle, nats_srv, redis_srv, test_id, maxMigratingPerWorkload=2)
    nc = await nats.connect(nats_srv.url)
    async with pipeline(config):
        create_job(kube, "first", first)
        await until_job(kube, "first", waiting_for_replacement)
        create_job(kube, "second", second)
        async with asyncio.timeout(30):
            deferral = await unavailable_deferral(nc, bus.Subjects(test_id), "second")
    await nc.close()
    assert "maxUnavailablePerWorkload 1/1 on workload ReplicationController/default/legacy" in deferral, (
        deferral
    )
