"""Surge, the executor's part: scale the pod's Deployment up by one, back down once the new pod is Ready,
and, when the job ends, make sure the count is what it was (see `shared.api.surge`).

Every write has a precondition (the Deployment's resourceVersion, through the scale subresource too), so
two executor replicas, or a redelivered command, never scale twice: the record on the Deployment says what
was done. A Deployment whose replica count is not the one the surge left was scaled by someone else: it is
handed back as it is (the record removed, the old pod's deletion cost taken back) and the job fails saying
so. A HorizontalPodAutoscaler targeting the Deployment refuses the surge unless
`surge.allowWithHorizontalPodAutoscaler`.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, Protocol

import msgspec

from shared.api import annotations as known
from shared.api import paths
from shared.api.messages import Command, Outcome, Step
from shared.api.names import ANNOTATION_SURGE
from shared.api.pmj import PodMigrationJob
from shared.api.pod import Pod, pod_from
from shared.api.surge import LOWEST_DELETION_COST, SurgeRecord, record_of
from shared.config import MigrationControllerArgs
from shared.consume import Retry
from shared.kube import KubeClient, KubeError

log = logging.getLogger(__name__)


class Report(Protocol):
    async def __call__(
        self, job: PodMigrationJob, step: Step, outcome: Outcome, *, message: str, target: str | None = None
    ) -> None: ...


MERGE = "application/merge-patch+json"
RETRY_S = 0.5
CONFLICTS_IN_PLACE = 4  # a step whose write loses a race is done again at once this many times at most


class Conflict(Retry):
    """A write lost a race with another writer (the Deployment controller's status, most often)."""


P = ParamSpec("P")


def again_on_conflict(step: Callable[P, Awaitable[None]]) -> Callable[P, Awaitable[None]]:
    """A surge step lost a write race: it is done again at once from fresh reads (each step is idempotent:
    the record says what was done), a few times before the command is handed back."""

    @functools.wraps(step)
    async def run(*args: P.args, **kwargs: P.kwargs) -> None:
        for _ in range(CONFLICTS_IN_PLACE - 1):
            try:
                return await step(*args, **kwargs)
            except Conflict:
                continue
        return await step(*args, **kwargs)

    return run


class SurgeFailed(Exception):
    """The surge cannot happen (the reason goes on the job)."""


class Surger:
    def __init__(self, kube: KubeClient, args: MigrationControllerArgs, report: Report) -> None:
        self.kube, self.args, self.report = kube, args, report

    async def act(self, job: PodMigrationJob, command: Command) -> None:
        """One of a surge's commands (`surge`, `scale-back`, `unsurge`) for `job`, read live."""
        pod = await self._job_pod(job, command.pod_uid)
        if command.step == "unsurge":
            await self.unsurge(job, pod, command.target)
        elif command.step == "scale-back":
            await self.scale_back(job, pod, command.target)
        elif pod is None or pod.metadata.deletion_timestamp is not None:
            await self.report(job, "surge", "gone", message="the pod to move is gone")
        else:
            await self.surge(job, pod)

    async def _job_pod(self, job: PodMigrationJob, pod_uid: str | None) -> Pod | None:
        """The pod the job moves, if it is still the one the command names."""
        ref = job.spec.pod_ref
        raw = await self._get(paths.pod(str(ref.namespace), str(ref.name))) if ref is not None else None
        pod = pod_from(raw) if raw is not None else None
        if pod is None or (pod_uid and pod.metadata.uid != pod_uid):
            return None
        return pod

    @again_on_conflict
    async def surge(self, job: PodMigrationJob, pod: Pod) -> None:
        """Mark the old pod cheapest to delete, record the surge on the Deployment, scale it up by one."""
        try:
            namespace, name = await self._deployment_of(pod)
            await self._refuse_if_autoscaled(namespace, name)
        except SurgeFailed as exc:
            await self.report(job, "surge", "failed", message=str(exc))
            return
        target = f"{namespace}/{name}"
        await self._mark(pod, LOWEST_DELETION_COST)
        deploy = await self._get(paths.deployment(namespace, name))
        if deploy is None:
            await self.report(
                job, "surge", "failed", message=f"Deployment {target} no longer exists", target=target
            )
            return
        record = record_of(deploy)
        uid = job.metadata.uid or ""
        if record is not None and record.job_uid != uid:
            why = f"Deployment {target} is surging for job {record.job}"
            await self.report(job, "surge", "blocked", message=why, target=target)
            raise Retry(why, RETRY_S * 4)
        replicas = int((deploy.get("spec") or {}).get("replicas", 1))
        if record is None:
            record = SurgeRecord(job=job.metadata.name or "", job_uid=uid, replicas=replicas)
            deploy = await self._write_record(deploy, record)
        if replicas == record.replicas:
            await self._scale(deploy, record.replicas + 1)
        elif replicas != record.replicas + 1:
            await self._hand_back(job, deploy, record=record, pod=pod, step="surge")
            return
        message = f"Deployment {target} scaled from {record.replicas} to {record.replicas + 1}"
        await self.report(job, "surge", "done", message=message, target=target)

    @again_on_conflict
    async def scale_back(self, job: PodMigrationJob, pod: Pod | None, target: str | None) -> None:
        """The new pod is Ready: back to the count before the surge; the ReplicaSet removes the old pod."""
        found = await self._surging(job, pod, target)
        if found is None:
            why = f"Deployment {target or '?'} carries no surge of this job"
            await self.report(job, "scale-back", "failed", message=why, target=target)
            return
        deploy, record = found
        name = _key(deploy)
        replicas = int((deploy.get("spec") or {}).get("replicas", 1))
        if record.restored:
            await self.report(
                job,
                "scale-back",
                "done",
                message=f"Deployment {name} is back to {record.replicas}",
                target=name,
            )
            return
        if replicas != record.replicas + 1:
            await self._hand_back(job, deploy, record=record, pod=pod, step="scale-back")
            return
        # The count and the record in one write: no moment where one is done and the other not.
        await self._write_record(
            deploy, msgspec.structs.replace(record, restored=True), replicas=record.replicas
        )
        message = f"Deployment {name} scaled back to {record.replicas}"
        await self.report(job, "scale-back", "done", message=message, target=name)

    @again_on_conflict
    async def unsurge(self, job: PodMigrationJob, pod: Pod | None, target: str | None) -> None:
        """The job ended: the count the surge added is taken back (once), then the record goes."""
        found = await self._surging(job, pod, target)
        if found is None:
            return
        deploy, record = found
        if pod is not None:
            # First: a job ended before its scale-down moves nothing; the ReplicaSet chooses as it would.
            await self._mark(pod, None)
        replicas = int((deploy.get("spec") or {}).get("replicas", 1))
        if not record.restored and replicas == record.replicas + 1:
            await self._write_record(deploy, None, replicas=record.replicas)
            log.info("restored Deployment %s to %d", _key(deploy), record.replicas)
        else:
            await self._write_record(deploy, None)

    # ----------------------------------------------------------------------------------------------------

    async def _surging(
        self, job: PodMigrationJob, pod: Pod | None, target: str | None
    ) -> tuple[dict[str, Any], SurgeRecord] | None:
        """The job's Deployment (`target`, else the old pod's) and the surge it records for this job."""
        if target:
            namespace, _, name = target.partition("/")
        elif pod is not None:
            try:
                namespace, name = await self._deployment_of(pod)
            except SurgeFailed:
                return None
        else:
            return await recorded_for(self.kube, job)
        deploy = await self._get(paths.deployment(namespace, name))
        record = record_of(deploy) if deploy is not None else None
        if deploy is None or record is None or record.job_uid != job.metadata.uid:
            return None
        return deploy, record

    async def _hand_back(
        self,
        job: PodMigrationJob,
        deploy: dict[str, Any],
        *,
        record: SurgeRecord,
        pod: Pod | None,
        step: Step,
    ) -> None:
        replicas = (deploy.get("spec") or {}).get("replicas")
        await self._write_record(deploy, None)
        if pod is not None:
            await self._mark(pod, None)
        why = (
            f"Deployment {_key(deploy)} was scaled to {replicas} by someone else during the surge"
            f" (it had {record.replicas}, the surge made {record.replicas + 1}): handed back as it is"
        )
        await self.report(job, step, "failed", message=why, target=_key(deploy))

    async def _deployment_of(self, pod: Pod) -> tuple[str, str]:
        namespace = pod.metadata.namespace or ""
        owner = next((r for r in pod.metadata.owner_references or [] if r.controller), None)
        if owner is None or owner.kind != "ReplicaSet":
            kind = f"{owner.kind} {owner.name}" if owner else "no controller"
            raise SurgeFailed(f"Surge moves pods of Deployments; pod {pod.metadata.name} has {kind}")
        rs = await self._get(paths.replicaset(namespace, owner.name or ""))
        refs = ((rs or {}).get("metadata") or {}).get("ownerReferences") or []
        deploy = next((r for r in refs if r.get("controller") and r.get("kind") == "Deployment"), None)
        if deploy is None:
            raise SurgeFailed(f"Surge moves pods of Deployments; ReplicaSet {owner.name} has none")
        return namespace, str(deploy["name"])

    async def _refuse_if_autoscaled(self, namespace: str, name: str) -> None:
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

    async def _mark(self, pod: Pod, cost: str | None) -> None:
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

    async def _write_record(
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

    async def _scale(self, deploy: dict[str, Any], replicas: int) -> dict[str, Any]:
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
        return await self._get(paths.deployment(namespace, name)) or deploy

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

    async def _get(self, path: str) -> dict[str, Any] | None:
        try:
            return await self.kube.get_json(path)
        except KubeError as exc:
            raise Retry(f"reading {path}: {exc}", RETRY_S) from exc


def _key(deploy: dict[str, Any]) -> str:
    meta = deploy.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


async def _read(request: Awaitable[bytes]) -> bytes:
    try:
        return await request
    except KubeError as exc:
        raise Retry(f"reading: {exc}", RETRY_S) from exc


async def recorded_for(kube: KubeClient, job: PodMigrationJob) -> tuple[dict[str, Any], SurgeRecord] | None:
    """Neither the Deployment's name (the surge's report was lost) nor the pod (gone) is known: the
    Deployment of the job's namespace that records a surge for this job."""
    namespace = job.spec.pod_ref.namespace if job.spec.pod_ref else None
    if not namespace:
        return None
    answer = await _read(kube.arequest("GET", paths.deployments(namespace)))
    for deploy in msgspec.json.decode(answer).get("items") or []:
        record = record_of(deploy)
        if record is not None and record.job_uid == job.metadata.uid:
            return deploy, record
    return None
