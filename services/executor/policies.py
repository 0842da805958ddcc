"""The eviction policies (Koordinator's `evictionPolicy`): how the pod is asked to go.

- `Eviction` (the default): the Eviction API, which the pod's disruption budgets may refuse;
- `Delete`: deleted outright, its uid a precondition (never another pod by the same name);
- `SoftEviction`: annotated for another component to evict when it sees fit (Koordinator's soft eviction),
  with the job's evict-trigger and evict-reason as its initiator and reason.

A pod's (else its job's) `koordinator.sh/evict-policy` label chooses among them
(`shared.api.eviction_policy`).

Each asks once; what the API server answers (a budget's refusal, a pod already gone) is the caller's to
read.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from shared.api import annotations as known
from shared.api import paths
from shared.api.eviction_policy import trigger_and_reason
from shared.api.pmj import PodMigrationJob
from shared.api.pod import Pod
from shared.api.soft_eviction import soft_eviction
from shared.kube.client import KubeClient

Ask = Callable[..., Awaitable[Any]]  # (kube, pod, *, delete_options, job: its PodMigrationJob)


async def evict(kube: KubeClient, pod: Pod, *, delete_options: dict[str, Any], job: PodMigrationJob) -> None:
    path = _path(pod)
    eviction = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": pod.metadata.name, "namespace": pod.metadata.namespace},
        "deleteOptions": delete_options or None,
    }
    await kube.arequest("POST", f"{path}/eviction", body=eviction)


async def delete(kube: KubeClient, pod: Pod, *, delete_options: dict[str, Any], job: PodMigrationJob) -> None:
    body = {**delete_options, "preconditions": {"uid": pod.metadata.uid}}
    await kube.arequest("DELETE", _path(pod), body=body)


async def soft_evict(
    kube: KubeClient, pod: Pod, *, delete_options: dict[str, Any], job: PodMigrationJob
) -> None:
    initiator, reason = trigger_and_reason(job.metadata.annotations or {}, job.metadata.name or "")
    record = soft_eviction(datetime.now(UTC), reason, delete_options, initiator=initiator)
    patch = {"metadata": {"annotations": {known.SOFT_EVICTION: record}}}
    await kube.arequest("PATCH", _path(pod), body=patch, content_type="application/merge-patch+json")


POLICIES: dict[str, Ask] = {"Eviction": evict, "Delete": delete, "SoftEviction": soft_evict}


def _path(pod: Pod) -> str:
    return paths.pod(pod.metadata.namespace or "", pod.metadata.name or "")
