"""What Surge writes on a Deployment and its pods, each write conditional: the surge's record and replica
count (one write, on the resourceVersion read), the scale subresource, the old pod's deletion cost; and the
reads behind them (the pod's Deployment, an autoscaler that would fight the surge). A write that lost a race
raises `Conflict`, one that met an outage `Retry`: either is done again from fresh reads."""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import Any

import msgspec

from shared.api import annotations as known
from shared.api import paths
from shared.api.names import ANNOTATION_SURGE
from shared.api.pmj import PodMigrationJob
from shared.api.pod import Pod
from shared.api.surge import SurgeRecord, record_of
from shared.config.model import MigrationControllerArgs
from shared.kube.client import KubeClient, KubeError
from shared.nats.consume import Retry

log = logging.getLogger(__name__)
MERGE = "application/merge-patch+json"
RETRY_S = 0.5


class SurgeFailed(Exception):
    """The surge cannot happen (the reason goes on the job)."""


class Conflict(Retry):
    """A write lost a race with another writer (the Deployment controller's status, most often)."""


class DeploymentWrites:
    def __init__(self, kube: KubeClient, args: MigrationControllerArgs) -> None:
        self.kube, self.args = kube, args

    async def recorded_for(self, job: PodMigrationJob) -> tuple[dict[str, Any], SurgeRecord] | None:
        """Neither the Deployment's name (the surge's report was lost) nor the pod (gone) is known: the
        Deployment of the job's namespace that records a surge for this job."""
        namespace = job.spec.pod_ref.namespace if job.spec.pod_ref else None
        if not namespace:
            return None
        answer = await _read(self.kube.arequest("GET", paths.deployments(namespace)))
        for deploy in msgspec.json.decode(answer).get("items") or []:
            record = record_of(deploy)
            if record is not None and record.job_uid == job.metadata.uid:
                return deploy, record
        return None

    async def deployment_of(self, pod: Pod) -> tuple[str, str]:
        namespace = pod.metadata.namespace or ""
        owner = next((r for r in pod.metadata.owner_references or [] if r.controller), None)
        if owner is None or owner.kind != "ReplicaSet":
            kind = f"{owner.kind} {owner.name}" if owner else "no controller"
            raise SurgeFailed(f"Surge moves pods of Deployments; pod {pod.metadata.name} has {kind}")
        rs = await self.read(paths.replicaset(namespace, owner.name or ""))
        refs = ((rs or {}).get("metadata") or {}).get("ownerReferences") or []
        deploy = next((r for r in refs if r.get("controller") and r.get("kind") == "Deployment"), None)
        if deploy is None:
            raise SurgeFailed(f"Surge moves pods of Deployments; ReplicaSet {owner.name} has none")
        return namespace, str(deploy["name"])

    async def refuse_if_autoscaled(self, namespace: str, name: str) -> None:
        if self.args.surge.allow_with_horizontal_pod_autoscaler:
            return
        answer = await _read(self.kube.arequest("GET", paths.autoscalers(namespace)))
        for hpa in msgspec.json.decode(answer).get("items") or []:
            target = (hpa.get("spec") or {}).get("scaleTargetRef") or {}
            if target.get("kind") == "Deployment" and target.get("name") == name:
                raise SurgeFailed(
                    f"HorizontalPodAutoscaler {namespace}/{hpa['metadata']['name']} scales Deployment"
                    f" {namespace}/{name}: a surge would fight it"
                    " (migrationController.surge.allowWithHorizontalPodAutoscaler)"
                )

    async def mark(self, pod: Pod, cost: str | None) -> None:
        """Set (or, None, take back) the old pod's deletion cost."""
        annotations = pod.metadata.annotations or {}
        if cost is not None and annotations.get(known.POD_DELETION_COST) == cost:
            return  # marked already (taking a mark back is never skipped: `pod` may be older than the mark)
        path = paths.pod(pod.metadata.namespace or "", pod.metadata.name or "")
        patch = {"metadata": {"annotations": {known.POD_DELETION_COST: cost}}}
        try:
            await self.kube.arequest("PATCH", path, body=patch, content_type=MERGE)
        except KubeError as exc:
            if exc.status != 404:
                raise Retry(f"marking pod {pod.metadata.name}: {exc}", RETRY_S) from exc

    async def write_record(
        self, deploy: dict[str, Any], record: SurgeRecord | None, *, replicas: int | None = None
    ) -> dict[str, Any]:
        """The surge's record on the Deployment (None: removed), and with it its replica count when given,
        in one write conditional on the resourceVersion read."""
        meta = deploy.get("metadata") or {}
        text = msgspec.json.encode(record).decode() if record is not None else None
        patch: dict[str, Any] = {
            "metadata": {
                "resourceVersion": meta.get("resourceVersion"),
                "annotations": {ANNOTATION_SURGE: text},
            }
        }
        if replicas is not None:
            patch["spec"] = {"replicas": replicas}
        path = paths.deployment(meta.get("namespace", ""), meta.get("name", ""))
        answer = await self._write(self.kube.arequest("PATCH", path, body=patch, content_type=MERGE))
        written: dict[str, Any] = msgspec.json.decode(answer)
        return written

    async def scale(self, deploy: dict[str, Any], replicas: int) -> dict[str, Any]:
        meta = deploy.get("metadata") or {}
        namespace, name = meta.get("namespace", ""), meta.get("name", "")
        body = {
            "apiVersion": "autoscaling/v1",
            "kind": "Scale",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "resourceVersion": meta.get("resourceVersion"),
            },
            "spec": {"replicas": replicas},
        }
        await self._write(self.kube.arequest("PUT", paths.deployment_scale(namespace, name), body=body))
        log.info("scaled Deployment %s/%s to %d", namespace, name, replicas)
        return await self.read(paths.deployment(namespace, name)) or deploy

    async def _write(self, request: Awaitable[bytes]) -> bytes:
        """A write; one that lost a race (409) or met an outage is tried again from a fresh read."""
        try:
            return await request
        except KubeError as exc:
            if exc.status == 409:
                raise Conflict(f"the Deployment changed meanwhile: {exc}", RETRY_S) from exc
            if exc.retryable:
                raise Retry(f"the Kubernetes API server is unavailable: {exc}", RETRY_S) from exc
            raise

    async def read(self, path: str) -> dict[str, Any] | None:
        try:
            return await self.kube.get_json(path)
        except KubeError as exc:
            raise Retry(f"reading {path}: {exc}", RETRY_S) from exc


def deployment_key(deploy: dict[str, Any]) -> str:
    meta = deploy.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


async def _read(request: Awaitable[bytes]) -> bytes:
    try:
        return await request
    except KubeError as exc:
        raise Retry(f"reading: {exc}", RETRY_S) from exc
