"""The gate's two doors, with the API server behind them: a PodMigrationJob write judged (`job_checks`) and
its author authorized by SubjectAccessReview as that user; an eviction of an opted-in pod turned into its
job (`evacuation`): the job made (or a failed one replaced), the pod marked as evicted in the background,
the evicter told 429. A dry-run eviction is answered as the real one would be, and changes nothing."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import msgspec

from services.gate.callers import Caller, Callers, unverified_refusal
from services.gate.evacuation import (
    FAILED_PHASES,
    Allow,
    PodView,
    Start,
    Wait,
    decide,
    gone_by,
    job_name,
    made_for,
    moved_by,
    opted_in,
    pod_key,
    pod_view,
    squatted,
    triggered,
)
from services.gate.job_door import JobDoor
from services.gate.labelled import LabelledPods
from services.gate.movable import let_through, refused, why_not
from services.gate.pod_facts import Unknown, read_facts
from services.gate.reviews import Refusal, Request, answer
from shared.api import paths
from shared.api.annotations import EVICTION_IN_PROGRESS
from shared.api.meta import ObjectReference
from shared.api.names import ANNOTATION_REASON, ANNOTATION_REQUESTER, GATE_EVACUATION, LABEL_EVACUATED_POD
from shared.api.pmj import TERMINAL_PHASES, PodMigrationJob, PodMigrationJobSpec
from shared.api.pmj_make import new_job
from shared.api.pmj_read import decode_pmj
from shared.config.model import PodherdConfig
from shared.kube.client import KubeClient, KubeError

log = logging.getLogger(__name__)
SERVICES = ("watcher", "arbitrator", "executor", "tracker", "gate")
MERGE_PATCH = "application/merge-patch+json"


class Webhooks:
    def __init__(self, config: PodherdConfig, kube: KubeClient, labelled: LabelledPods) -> None:
        self.kube, self.policy, self.labelled = kube, config.gate.interceptor, labelled
        self.args = config.migration_controller
        self.callers = Callers(config.gate)
        self.own = frozenset(config.gate.service_account(s) for s in SERVICES)
        self.executor = config.gate.service_account("executor")
        self.jobs = JobDoor(kube, self.own)

    async def job_write(self, request: Request) -> bytes:
        return await self.jobs.write(request)

    async def job_requester(self, request: Request) -> bytes:
        return await self.jobs.requester(request)

    async def eviction(self, request: Request, *, namespace_opted: bool, caller: Caller) -> bytes:
        evicter = request.user_info.username
        if evicter == self.executor:
            return answer(request.uid)  # the move itself: its budgets still apply
        label = self.labelled.value(request.namespace, request.name)
        if label != "true" and (not namespace_opted or label == "false"):
            return answer(request.uid)  # not opted in, as its label says (the common case: no request)
        raw = await self.kube.get_json(paths.pod(request.namespace, request.name), request_timeout=3.0)
        pod = None if raw is None else pod_view(request.namespace, request.name, raw)
        if raw is None or pod is None or not opted_in(pod, namespace_opted):
            return answer(request.uid)
        name, now = job_name(pod.uid), datetime.now(UTC)
        job = await self._job(name)
        if job is not None and not made_for(job, pod):
            return answer(request.uid, Refusal(409, squatted(pod, name)))
        # A retry of the eviction a move answered, unless the replacement's own node is being drained now
        # (cordoned): then it is a new eviction, and the replacement moves again.
        moved = None if job is not None else moved_by(pod, await self._jobs_of(pod), evicter=evicter, now=now)
        if moved is not None and not await self._on_cordoned_node(raw):
            return answer(request.uid, Refusal(404, gone_by(pod, moved)))
        step = decide(pod, job, policy=self.policy, now=now)
        if isinstance(step, Allow):
            return answer(request.uid, warnings=(step.warning,) if step.warning else ())
        # No job for a pod no job could move (nor a failed one's retry refused for it).
        restarts = isinstance(step, Start) or (job is not None and job.phase in FAILED_PHASES)
        if restarts and (unmovable := await self._unmovable(request, raw)) is not None:
            return unmovable
        writes = not request.dry_run and self.callers.may_write(caller)
        if isinstance(step, Wait):
            if job is not None and _unmarked_by_its_maker(job, pod) and writes:
                await self._mark(pod, name)  # made by a replica that died before it could mark the pod
            return answer(request.uid, Refusal(429, step.message))
        if not request.dry_run and not writes:
            log.warning("unverified caller %r: no job for %s/%s", caller.name, pod.namespace, pod.name)
            return answer(request.uid, Refusal(403, unverified_refusal(caller)))
        if not request.dry_run:
            await self._start(
                pod, name, evicter=request.user_info.username, replace=job if step.replace else None
            )
        return answer(request.uid, Refusal(429, triggered(pod, None if request.dry_run else name)))

    async def _unmovable(self, request: Request, raw: dict[str, Any]) -> bytes | None:
        """The answer to an eviction of a pod a job would fail at once (`interceptor.unmovable`); None when
        none would, or when its workload cannot be read here (the arbitrator judges its job)."""
        try:
            facts = await read_facts(self.kube, raw, self.args)
        except (Unknown, KubeError) as exc:
            log.info("pod %s/%s: not judged before its job (%s)", request.namespace, request.name, exc)
            return None
        pod, policy = facts.pod, self.policy
        mode = policy.mode or self.args.default_job_mode
        rejection = why_not(pod, facts.workload, args=self.args, mode=mode, budgets=facts.budgets)
        if rejection is None:
            return None
        if policy.unmovable == "allow":
            return answer(request.uid, warnings=(let_through(pod, rejection),))
        return answer(request.uid, Refusal(403, refused(pod, rejection)))

    async def _on_cordoned_node(self, raw: dict[str, Any]) -> bool:
        node = (raw.get("spec") or {}).get("nodeName")
        found = await self.kube.get_json(paths.node(node), request_timeout=3.0) if node else None
        return bool(((found or {}).get("spec") or {}).get("unschedulable"))

    async def _job(self, name: str) -> PodMigrationJob | None:
        raw = await self.kube.get_json(paths.job(name), request_timeout=3.0)
        return None if raw is None else decode_pmj(raw)[0]

    async def _jobs_of(self, pod: PodView) -> list[PodMigrationJob]:
        """The jobs the gate made for pods of this name (the ones before this pod, for a StatefulSet's)."""
        selector = f"{LABEL_EVACUATED_POD}={pod_key(pod.namespace, pod.name)}"
        items = await self.kube.list_items(paths.JOBS, selector, request_timeout=3.0)
        return [decode_pmj(item)[0] for item in items]

    async def _start(self, pod: PodView, name: str, *, evicter: str, replace: PodMigrationJob | None) -> None:
        """`replace`: the pod's failed job, deleted first."""
        if replace is not None:
            body = {"preconditions": {"uid": replace.metadata.uid}}
            try:
                await self.kube.arequest("DELETE", paths.job(name), body=body)
            except KubeError as exc:
                if exc.status not in (404, 409):  # gone, or replaced by another replica already
                    raise
        ref = ObjectReference(kind="Pod", namespace=pod.namespace, name=pod.name, uid=pod.uid)
        annotations = {ANNOTATION_REQUESTER: evicter, ANNOTATION_REASON: f"an eviction by {evicter}"}
        spec = PodMigrationJobSpec(pod_ref=ref, mode=self.policy.mode or self.args.default_job_mode)
        labels = {LABEL_EVACUATED_POD: pod_key(pod.namespace, pod.name)}
        job = new_job(name, spec, annotations=annotations, labels=labels)
        try:
            await self.kube.arequest("POST", paths.JOBS, body=msgspec.to_builtins(job))
            log.info("eviction of %s/%s by %s became job %s", pod.namespace, pod.name, evicter, name)
        except KubeError as exc:
            if exc.status != 409:  # another replica made it for the same eviction
                raise
        await self._mark(pod, name)

    async def _mark(self, pod: PodView, name: str) -> None:
        mark = {"metadata": {"annotations": {EVICTION_IN_PROGRESS: f"{GATE_EVACUATION}{name}"}}}
        try:
            await self.kube.arequest(
                "PATCH", paths.pod(pod.namespace, pod.name), body=mark, content_type=MERGE_PATCH
            )
        except KubeError as exc:
            if exc.status != 404:
                raise


def _unmarked_by_its_maker(job: PodMigrationJob, pod: PodView) -> bool:
    """A job the gate made (its label), still running, for a pod it has not marked."""
    made_here = LABEL_EVACUATED_POD in (job.metadata.labels or {})
    return made_here and job.phase not in TERMINAL_PHASES and not pod.marked
