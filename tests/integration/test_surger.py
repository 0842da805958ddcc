"""The executor's side of a surge against kubesim: whoever handles a command, and however often, the
Deployment is scaled up once, back down once, and what the surge recorded is gone at the end."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from kubesim.sim import SimHandle
from podherd.install import install_with_accounts
from services.executor.surging import Surger
from shared.api import annotations as known
from shared.api.messages import Outcome, Step
from shared.api.meta import ObjectMeta, ObjectReference
from shared.api.names import ANNOTATION_SURGE
from shared.api.pmj import PodMigrationJob, PodMigrationJobSpec
from shared.api.pod import Pod, pod_from
from shared.config.loader import config_from_dict
from shared.kube.client import KubeClient
from shared.nats.consume import Retry
from tests.kube import Kube, client_for, pod_ready, watch_until

pytestmark = pytest.mark.integration
SINGLE = {
    "name": "single",
    "nodes": [{"name": "node-{i}", "count": 2, "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"}}],
    "workloads": [{"kind": "Deployment", "name": "web", "replicas": 1, "requests": {"cpu": "500m"}}],
}


class Said:
    def __init__(self) -> None:
        self.reports: list[tuple[str, str, str]] = []

    async def __call__(
        self,
        job: PodMigrationJob,
        step: Step,
        outcome: Outcome,
        *,
        message: str,
        target: str | None = None,
        policy: str | None = None,
    ) -> None:
        self.reports.append((step, outcome, message))


def single_ready(handle: SimHandle) -> Kube:
    """The client of a kubesim running SINGLE, once its one pod is Ready."""
    kube = client_for(handle)
    watch_until(
        kube.core.list_namespaced_pod,
        lambda s: len(s) == 1 and all(pod_ready(p) for p in s.values()),
        namespace="default",
    )
    return kube


@pytest.fixture
async def surger(kubesim_factory: Callable[..., SimHandle]) -> AsyncIterator[tuple[Kube, Surger, Said]]:
    kube = single_ready(kubesim_factory(SINGLE))
    config = config_from_dict({"kubernetes": {"kubeconfig": str(kube.handle.kubeconfig)}})
    client = KubeClient.from_config(config.kubernetes)
    said = Said()
    try:
        yield kube, Surger(client, config.migration_controller, said), said
    finally:
        await client.aclose()


def job(name: str, pod: str) -> PodMigrationJob:
    return PodMigrationJob(
        metadata=ObjectMeta(name=name, uid=f"{name}-uid"),
        spec=PodMigrationJobSpec(pod_ref=ObjectReference(namespace="default", name=pod)),
    )


def state(kube: Kube) -> tuple[int, dict[str, Any] | None]:
    deploy = kube.apps.read_namespaced_deployment("web", "default")
    record = (deploy.metadata.annotations or {}).get(ANNOTATION_SURGE)
    return deploy.spec.replicas, json.loads(record) if record else None


def the_pod(kube: Kube) -> Any:
    (pod,) = kube.core.list_namespaced_pod("default").items
    return pod


async def surged(kube: Kube, executor: Surger) -> tuple[Any, Pod, PodMigrationJob]:
    """The Deployment's pod (the client's, and as the executor reads it) surged for job j1."""
    old = the_pod(kube)
    pod = pod_from(kube.api.sanitize_for_serialization(old))
    moving = job("j1", old.metadata.name)
    await executor.surge(moving, pod)
    return old, pod, moving


async def test_a_surge_asked_twice_scales_once_and_its_end_asked_twice_restores_once(
    surger: tuple[Kube, Surger, Said],
) -> None:
    kube, executor, said = surger
    old, pod, moving = await surged(kube, executor)
    await executor.surge(moving, pod)  # redelivered, or another replica
    assert state(kube) == (2, {"job": "j1", "jobUid": "j1-uid", "replicas": 1, "restored": False})
    marked = kube.core.read_namespaced_pod(old.metadata.name, "default")
    assert marked.metadata.annotations[known.POD_DELETION_COST] == "-2147483648"
    assert [r[:2] for r in said.reports] == [("surge", "done"), ("surge", "done")]
    # The job ends (failed, say) before any scale-down: the count goes back, once.
    await executor.unsurge(moving, pod, "default/web")
    await executor.unsurge(moving, pod, "default/web")
    assert state(kube) == (1, None)
    unmarked = kube.core.read_namespaced_pod(old.metadata.name, "default")
    assert known.POD_DELETION_COST not in (unmarked.metadata.annotations or {})


async def test_after_the_scale_down_the_end_never_scales_down_again(
    surger: tuple[Kube, Surger, Said],
) -> None:
    kube, executor, _ = surger
    _, pod, moving = await surged(kube, executor)
    await executor.scale_back(moving, pod, "default/web")
    assert state(kube) == (1, {"job": "j1", "jobUid": "j1-uid", "replicas": 1, "restored": True})
    kube.apps.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": 2}})  # someone else
    await executor.unsurge(moving, None, "default/web")
    assert state(kube) == (2, None)


async def test_a_deployment_surging_for_another_job_waits(surger: tuple[Kube, Surger, Said]) -> None:
    kube, executor, said = surger
    old, pod, _ = await surged(kube, executor)
    with pytest.raises(Retry):
        await executor.surge(job("j2", old.metadata.name), pod)
    assert said.reports[-1][:2] == ("surge", "blocked")
    assert state(kube)[0] == 2


async def test_a_surge_whose_report_was_lost_and_whose_pod_is_gone_is_still_taken_back(
    kubesim_factory: Callable[..., SimHandle], tmp_path: Path
) -> None:
    """The executor died after the scale-up, before reporting which Deployment it scaled, and the old pod
    was deleted meanwhile: the ending finds the Deployment by the job's record on it (as the executor's
    ServiceAccount, whose role lists Deployments for this) and takes the surge back."""
    handle = kubesim_factory(SINGLE)
    kube = single_ready(handle)
    install_with_accounts(handle.kubeconfig, tmp_path, ("executor",), seconds=3600)
    config = config_from_dict({"kubernetes": {"kubeconfig": str(tmp_path / "kubeconfig-executor")}})
    client = KubeClient.from_config(config.kubernetes)
    try:
        executor = Surger(client, config.migration_controller, Said())
        old, _, moving = await surged(kube, executor)
        kube.core.delete_namespaced_pod(old.metadata.name, "default", grace_period_seconds=0)
        assert state(kube)[0] == 2
        await executor.unsurge(moving, None, None)
    finally:
        await client.aclose()
    assert state(kube) == (1, None)
    assert handle.sim is not None
    used = {(v, g, r) for u, v, g, r in handle.sim.authorizer.used if u.endswith("podherd-executor")}
    assert ("list", "apps", "deployments") in used


async def test_a_pod_of_another_workload_kind_is_refused_surge_plainly(
    surger: tuple[Kube, Surger, Said],
) -> None:
    kube, executor, said = surger
    template = {
        "metadata": {"labels": {"app": "legacy"}},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
    }
    controller = {
        "metadata": {"name": "legacy"},
        "spec": {"replicas": 1, "selector": {"app": "legacy"}, "template": template},
    }
    kube.core.create_namespaced_replication_controller("default", controller)
    (legacy,) = watch_until(
        kube.core.list_namespaced_pod, lambda s: len(s) == 1, namespace="default", label_selector="app=legacy"
    ).values()
    await executor.surge(
        job("j1", legacy.metadata.name), pod_from(kube.api.sanitize_for_serialization(legacy))
    )
    assert said.reports == [
        (
            "surge",
            "failed",
            f"Surge moves pods of Deployments; pod {legacy.metadata.name} has ReplicationController legacy",
        )
    ]
    assert kube.core.read_namespaced_replication_controller("legacy", "default").spec.replicas == 1
