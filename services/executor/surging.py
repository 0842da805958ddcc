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

from services.executor.deployment_writes import Conflict, DeploymentWrites, SurgeFailed, deployment_key
from shared.api import paths
from shared.api.messages import Command, Outcome, Step
from shared.api.pmj import PodMigrationJob
from shared.api.pod import Pod, pod_from
from shared.api.surge import LOWEST_DELETION_COST, SurgeRecord, record_of
from shared.config.model import MigrationControllerArgs
from shared.kube.client import KubeClient
from shared.nats.consume import Retry

log = logging.getLogger(__name__)


class Report(Protocol):
    async def __call__(
        self,
        job: PodMigrationJob,
        step: Step,
        outcome: Outcome,
        *,
        message: str,
        target: str | None = None,
        policy: str | None = None,
    ) -> None: ...


MERGE = "application/merge-patch+json"
RETRY_S = 0.5
CONFLICTS_IN_PLACE = 4  # a step whose write loses a race is done again at once this many times at most


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


class Surger:
    def __init__(self, kube: KubeClient, args: MigrationControllerArgs, report: Report) -> None:
        self.kube, self.args, self.report = kube, args, report
        self.deployments = DeploymentWrites(kube, args)

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
        raw = (
            await self.deployments.read(paths.pod(str(ref.namespace), str(ref.name)))
            if ref is not None
            else None
        )
        pod = pod_from(raw) if raw is not None else None
        if pod is None or (pod_uid and pod.metadata.uid != pod_uid):
            return None
        return pod

    @again_on_conflict
    async def surge(self, job: PodMigrationJob, pod: Pod) -> None:
        """Mark the old pod cheapest to delete, record the surge on the Deployment, scale it up by one."""
        try:
            namespace, name = await self.deployments.deployment_of(pod)
            await self.deployments.refuse_if_autoscaled(namespace, name)
        except SurgeFailed as exc:
            await self.report(job, "surge", "failed", message=str(exc))
            return
        target = f"{namespace}/{name}"
        await self.deployments.mark(pod, LOWEST_DELETION_COST)
        deploy = await self.deployments.read(paths.deployment(namespace, name))
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
            deploy = await self.deployments.write_record(deploy, record)
        if replicas == record.replicas:
            await self.deployments.scale(deploy, record.replicas + 1)
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
        name = deployment_key(deploy)
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
        await self.deployments.write_record(
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
            await self.deployments.mark(pod, None)
        replicas = int((deploy.get("spec") or {}).get("replicas", 1))
        if not record.restored and replicas == record.replicas + 1:
            await self.deployments.write_record(deploy, None, replicas=record.replicas)
            log.info("restored Deployment %s to %d", deployment_key(deploy), record.replicas)
        else:
            await self.deployments.write_record(deploy, None)

    # ----------------------------------------------------------------------------------------------------

    async def _surging(
        self, job: PodMigrationJob, pod: Pod | None, target: str | None
    ) -> tuple[dict[str, Any], SurgeRecord] | None:
        """The job's Deployment (`target`, else the old pod's) and the surge it records for this job."""
        if target:
            namespace, _, name = target.partition("/")
        elif pod is not None:
            try:
                namespace, name = await self.deployments.deployment_of(pod)
            except SurgeFailed:
                return None
        else:
            return await self.deployments.recorded_for(job)
        deploy = await self.deployments.read(paths.deployment(namespace, name))
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
        await self.deployments.write_record(deploy, None)
        if pod is not None:
            await self.deployments.mark(pod, None)
        why = (
            f"Deployment {deployment_key(deploy)} was scaled to {replicas} by someone else during the surge"
            f" (it had {record.replicas}, the surge made {record.replicas + 1}): handed back as it is"
        )
        await self.report(job, step, "failed", message=why, target=deployment_key(deploy))
