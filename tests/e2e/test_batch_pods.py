"""A pod of a `batch/v1` Job, as Podherd meets one on a real cluster: its controller is a Job, of which
Podherd reads no replica count, so the expected-replicas rule refuses it naming the Job; with that rule
off, the pod moves into the room reserved for it, the Job's own replacement takes the room, and the Job
counts the eviction as one failed pod (what a migration costs a Job)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import kubernetes
import pytest

from kubesim.sim import SimHandle
from podherd.harness.servers import Server
from tests.e2e.pipeline import create_job, ended, pipeline, pipeline_config, until_job
from tests.e2e.test_lifecycle import cluster, reservations, start
from tests.kube import Kube, watch_until

pytestmark = [pytest.mark.e2e, pytest.mark.integration]


def batch_job(kube: Kube, annotations: dict[str, str] | None = None) -> tuple[Any, Any]:
    """A Job of two 1-CPU pods that run until they are told to end, and one of its pods once running."""
    container = {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}
    body: Any = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "work"},
        "spec": {
            "parallelism": 2,
            "completions": 2,
            "template": {
                "metadata": {"labels": {"app": "work"}, "annotations": annotations or {}},
                "spec": {
                    "restartPolicy": "Never",
                    "schedulerName": "koord-scheduler",
                    "containers": [container],
                },
            },
        },
    }
    job = kubernetes.client.BatchV1Api(kube.api).create_namespaced_job("default", body)
    pods = watch_until(
        kube.core.list_namespaced_pod,
        lambda s: len(s) == 2 and all(p.status.phase == "Running" for p in s.values()),
        namespace="default",
        label_selector="app=work",
    )
    return job, sorted(pods.values(), key=lambda p: p.metadata.name)[0]


async def test_a_job_pod_is_refused_by_expected_replicas_or_moves_at_the_cost_of_a_retry(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    """By default the expected-replicas rule refuses it, naming its Job. Annotated with Koordinator's
    `descheduler.alpha.kubernetes.io/evict`, it passes the arbitration's filters and limits, that rule and
    the per-workload limits (a Job has no replica count to scale them by) among them, as in Koordinator, and
    moves."""
    kube = start(kubesim_factory, cluster(web=0), job_backoff=0.2)
    batch, pod = batch_job(kube, {})
    async with pipeline(pipeline_config(kube.handle, nats_srv, redis_srv, f"{test_id}-default")):
        create_job(kube, "refused", pod.metadata.name)
        refused = (await until_job(kube, "refused", ended))["status"]
    assert refused["phase"] == "Failed", refused
    assert "workload Job.batch/default/work expects no replicas" in refused["message"], refused
    assert kube.core.read_namespaced_pod(pod.metadata.name, "default").metadata.deletion_timestamp is None
    evict = {"metadata": {"annotations": {"descheduler.alpha.kubernetes.io/evict": "true"}}}
    kube.core.patch_namespaced_pod(pod.metadata.name, "default", evict)
    config = pipeline_config(kube.handle, nats_srv, redis_srv, test_id)
    async with pipeline(config):
        create_job(kube, "job-pod", pod.metadata.name)
        job = await until_job(kube, "job-pod", ended)
    status = job["status"]
    assert status["phase"] == "Succeeded", status
    replacement = kube.core.read_namespaced_pod(status["podRef"]["name"], "default")
    owner = replacement.metadata.owner_references[0]
    assert (owner.kind, owner.uid) == ("Job", batch.metadata.uid)  # the Job's own new pod
    assert replacement.spec.node_name == status["nodeName"] != pod.spec.node_name
    assert reservations(kube) == []
    counted = watch_until(
        kubernetes.client.BatchV1Api(kube.api).list_namespaced_job,
        lambda s: s["default/work"].status.failed == 1,
        namespace="default",
    )
    assert counted["default/work"].status.active == 2
