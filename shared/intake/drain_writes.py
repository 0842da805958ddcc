"""A drain's writes to the cluster, whoever asks for it: the tracker for a drain intent (its sender authorized
by Kubernetes first), or `podherd drain --via kubernetes` with a person's own credentials (the API server
authorizing each write). The plan comes first (`drain_plan`): a drain that kubectl would refuse (a
DaemonSet's pod without `--ignore-daemonsets`, an emptyDir without `--delete-emptydir-data`, a bare pod
without `--force`) is refused whole, naming the pods, and changes nothing. Otherwise the node is cordoned
and its drain recorded on it (annotation `podherd.io/drain`: who asked, the flags, whether it was cordoned
before, the jobs) in one write, then one job per pod is created. Job names come from the node and the pod's
uid, so a drain sent again (an interrupted CLI, a retrying tool) finds the jobs it made and creates only the
missing ones.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec

from shared.api import paths
from shared.api.drain import RESERVING, ROLLED_BACK, DrainRecord, drain_job_name, drain_record, node_hash
from shared.api.messages import DrainIntent, DrainMove, DrainReply, IntentError, IntentErrorCode
from shared.api.meta import ObjectReference
from shared.api.names import (
    ANNOTATION_ATOMIC,
    ANNOTATION_CLAIMED_REQUESTER,
    ANNOTATION_DRAIN_NODE,
    ANNOTATION_LIFTS,
    ANNOTATION_NODE_DRAIN,
    ANNOTATION_REASON,
    ANNOTATION_REQUESTER,
    ANNOTATION_STRATEGY_REASON,
    LABEL_DRAIN,
)
from shared.api.pmj import PodMigrationJob, PodMigrationJobSpec
from shared.api.pmj_make import new_job
from shared.config.model import MigrationControllerArgs
from shared.intake.drain_plan import DrainPlan, Move, plan_drain
from shared.kube.client import KubeClient, KubeError


class DrainRefused(Exception):
    def __init__(self, code: IntentErrorCode, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.error = IntentError(code=code, message=message, field=field)


def drain_job(node: str, move: Move, intent: DrainIntent, *, requester: str | None) -> PodMigrationJob:
    """`requester`: who the drain was authorized as, where Podherd verified it and writes the job (None:
    written by its sender through the API server, whose admission gate records the author as requester)."""
    annotations = {ANNOTATION_DRAIN_NODE: node, ANNOTATION_REASON: f"drain of node {node}"}
    if requester is not None:
        annotations[ANNOTATION_REQUESTER] = requester
        annotations[ANNOTATION_CLAIMED_REQUESTER] = intent.requester
    if move.lifts:
        annotations[ANNOTATION_LIFTS] = ",".join(sorted(move.lifts))
    if move.why:
        annotations[ANNOTATION_STRATEGY_REASON] = move.why
    atomic = intent.options.atomic
    if atomic:  # paused with its room reserved until every pod of the drain has room (`atomic.py`)
        annotations[ANNOTATION_ATOMIC] = "true"
    pod = ObjectReference(kind="Pod", namespace=move.namespace, name=move.name, uid=move.uid)
    ttl = intent.options.timeout
    spec = PodMigrationJobSpec(pod_ref=pod, mode=move.mode, ttl=ttl, paused=atomic or None)  # type: ignore[arg-type]
    labels = {LABEL_DRAIN: node_hash(node)}
    return new_job(drain_job_name(node, move.uid), spec, annotations=annotations, labels=labels)


class DrainWrites:
    """The node looked up, the pods planned, then (`write`) the node cordoned with its record and the jobs
    made, all through `kube` with its credentials."""

    def __init__(self, kube: KubeClient, args: MigrationControllerArgs) -> None:
        self.kube, self.args = kube, args

    async def look(self, intent: DrainIntent) -> tuple[dict[str, Any], DrainPlan]:
        """The node (a rolled-back atomic drain's record cleared first, unless a dry run) and the plan."""
        node = await self.kube.get_json(paths.node(intent.node))
        if node is None:
            raise DrainRefused("MissingNode", f"node {intent.node} not found", "node")
        if not intent.dry_run:
            node = await self._after_rollback(node)
        plan = plan_drain(await self._pods(intent), intent.options, scheduler_names=self.args.scheduler_names)
        return node, plan

    async def reply(self, node: dict[str, Any], plan: DrainPlan) -> DrainReply:
        name = (node.get("metadata") or {}).get("name") or ""
        reply = self._reply(name, plan)
        await self._already_moving(node, plan, reply)
        return reply

    async def write(
        self,
        intent: DrainIntent,
        node: dict[str, Any],
        *,
        plan: DrainPlan,
        reply: DrainReply,
        requester: str,
        verified: bool,
    ) -> None:
        """Cordon and record (as `requester`), then one job per pod; `verified`: Podherd proved who it is."""
        await self._cordon(intent, requester, node, jobs=[m.job for m in reply.moves])
        proven = requester if verified else None
        for move in plan.moves:
            await self._create(drain_job(intent.node, move, intent, requester=proven))

    async def _after_rollback(self, node: dict[str, Any]) -> dict[str, Any]:
        """An atomic drain rolled back is over: sent again, the drain starts anew (its aborted jobs go)."""
        meta = node.get("metadata") or {}
        record = drain_record(node)
        if record is None or record.phase != ROLLED_BACK:
            return node
        for job in record.jobs:
            try:
                await self.kube.arequest("DELETE", paths.job(job))
            except KubeError as exc:
                if exc.status != 404:
                    raise
        patch = {
            "metadata": {
                "resourceVersion": meta.get("resourceVersion"),
                "annotations": {ANNOTATION_NODE_DRAIN: None},
            }
        }
        await self.kube.arequest(
            "PATCH",
            paths.node(meta.get("name") or ""),
            body=patch,
            content_type="application/merge-patch+json",
        )
        return await self.kube.get_json(paths.node(meta.get("name") or "")) or node

    async def _pods(self, intent: DrainIntent) -> list[dict[str, Any]]:
        query = [("fieldSelector", f"spec.nodeName={intent.node}")]
        if intent.options.pod_selector:
            query.append(("labelSelector", intent.options.pod_selector))
        try:
            answer = await self.kube.arequest("GET", paths.PODS, query)
        except KubeError as exc:
            if exc.status == 400:
                raise DrainRefused("InvalidIntent", exc.message, "options.podSelector") from exc
            raise
        items: list[dict[str, Any]] = msgspec.json.decode(answer).get("items") or []
        return items

    @staticmethod
    def _reply(node: str, plan: DrainPlan) -> DrainReply:
        moves = [
            DrainMove(pod=m.key, job=drain_job_name(node, m.uid), mode=m.mode, why=m.why or None)  # type: ignore[arg-type]
            for m in plan.moves
        ]
        errors = plan.errors()
        error = None
        if errors:
            error = IntentError(code="Refused", message="; ".join(errors))
        return DrainReply(
            ok=not errors,
            node=node,
            moves=moves,
            stays=dict(plan.stays),
            warnings=plan.warnings(),
            refusals=errors,
            error=error,
        )

    async def _already_moving(self, node: dict[str, Any], plan: DrainPlan, reply: DrainReply) -> None:
        """The jobs this drain made before (sent before, and interrupted), from the node's record and for
        the pods already going: still the drain's, to be followed until they end."""
        name = (node.get("metadata") or {}).get("name") or ""
        recorded = drain_record(node)
        before = recorded.jobs if recorded else []
        known = {m.job for m in reply.moves}
        for job in [*before, *(drain_job_name(name, uid) for uid in plan.going.values())]:
            if job in known:
                continue
            known.add(job)
            found = await self.kube.get_json(paths.job(job))
            ref = ((found or {}).get("spec") or {}).get("podRef") or {}
            if found is None or not ref.get("name"):
                continue  # collected: `podherd drain --status` tells how it went
            pod = f"{ref.get('namespace', '')}/{ref['name']}"
            mode = (found.get("spec") or {}).get("mode") or self.args.default_job_mode
            reply.moves.append(DrainMove(pod=pod, job=job, mode=mode))
            reply.stays.pop(pod, None)

    async def _cordon(
        self, intent: DrainIntent, requester: str, node: dict[str, Any], *, jobs: list[str]
    ) -> None:
        """Cordon the node and record the drain on it, in one write (its resourceVersion a precondition)."""
        meta = node.get("metadata") or {}
        for _ in range(5):
            before = drain_record(node)
            unschedulable = bool((node.get("spec") or {}).get("unschedulable"))
            record = DrainRecord(
                requester=requester,
                started_at=before.started_at
                if before
                else datetime.now(UTC).isoformat().replace("+00:00", "Z"),
                cordoned_before=before.cordoned_before if before else unschedulable,
                options=intent.options,
                jobs=sorted(set(before.jobs if before else []) | set(jobs)),
                phase=(before.phase if before and before.phase else RESERVING)
                if intent.options.atomic
                else None,
            )
            patch = {
                "metadata": {
                    "resourceVersion": meta.get("resourceVersion"),
                    "annotations": {ANNOTATION_NODE_DRAIN: msgspec.json.encode(record).decode()},
                },
                "spec": {"unschedulable": True},
            }
            try:
                await self.kube.arequest(
                    "PATCH", paths.node(intent.node), body=patch, content_type="application/merge-patch+json"
                )
                return
            except KubeError as exc:
                if exc.status != 409:
                    raise
            node = await self.kube.get_json(paths.node(intent.node)) or {}
            meta = node.get("metadata") or {}
        raise DrainRefused("Unavailable", f"node {intent.node} kept changing; send the drain again")

    async def _create(self, job: PodMigrationJob) -> None:
        try:
            await self.kube.arequest("POST", paths.JOBS, body=msgspec.to_builtins(job))
        except KubeError as exc:
            if exc.status != 409:
                raise
            found = await self.kube.get_json(paths.job(job.metadata.name or ""))
            ref = ((found or {}).get("spec") or {}).get("podRef") or {}
            wanted = job.spec.pod_ref
            if found is not None and wanted is not None and ref.get("uid") != wanted.uid:
                raise DrainRefused("Conflict", f"job {job.metadata.name} exists for another pod") from exc
