"""Migration intents as PodMigrationJobs (pure): the job an intent asks for, and whether an existing job is
that job.

The job's name is derived from the intent's idempotency key alone (`podherd-` and 20 hex digits of its
SHA-256), so the same intent sent twice, by any path and to any replica, names one job. What the intent
says beyond the spec travels as annotations: the key, the requester as verified (the identity the intent
was authorized as) and the one it claimed, the migration priority (the sort reads it), the target node
(the defragmentation article; the executor pins the Reservation there) and the reason.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from shared.api.messages import MigrationIntent
from shared.api.meta import ObjectReference
from shared.api.names import (
    ANNOTATION_ATOMIC,
    ANNOTATION_ATOMIC_SIZE,
    ANNOTATION_ATOMIC_TIMEOUT,
    ANNOTATION_CLAIMED_REQUESTER,
    ANNOTATION_INTENT_ID,
    ANNOTATION_MIGRATION_PRIORITY,
    ANNOTATION_REASON,
    ANNOTATION_REQUESTER,
    ANNOTATION_SOURCE_NODE,
    ANNOTATION_TARGET_NODE,
    ANNOTATION_WORKLOAD,
    LABEL_ATOMIC_PLAN,
)
from shared.api.pmj import PodMigrationJob, PodMigrationJobSpec
from shared.api.pmj_make import new_job


def job_name(idempotency_key: str) -> str:
    return "podherd-" + hashlib.sha256(idempotency_key.encode()).hexdigest()[:20]


def job_for(
    intent: MigrationIntent, requester: str | None, *, found: Mapping[str, Any] | None = None
) -> PodMigrationJob:
    """`requester`: who the intent was authorized as, where Podherd verified it and writes the job (None:
    written by its sender through the API server, whose admission gate records the author as requester).
    `found`: the pod as read, whose node and controller the job records."""
    annotations = {
        ANNOTATION_INTENT_ID: intent.idempotency_key,
        ANNOTATION_MIGRATION_PRIORITY: str(intent.priority),
    }
    if requester is not None:
        annotations[ANNOTATION_REQUESTER] = requester
        annotations[ANNOTATION_CLAIMED_REQUESTER] = intent.requester
    if intent.target_node:
        annotations[ANNOTATION_TARGET_NODE] = intent.target_node
    if intent.reason:
        annotations[ANNOTATION_REASON] = intent.reason
    if found is not None:
        annotations.update(_where_from(found))
    pod = ObjectReference(
        kind="Pod", namespace=intent.pod.namespace, name=intent.pod.name, uid=intent.pod.uid
    )
    plan = intent.atomic_plan
    labels = {}
    if plan is not None:  # paused, its room reserved, until every job of the plan has room (`atomic_plans`)
        annotations[ANNOTATION_ATOMIC] = "true"
        annotations[ANNOTATION_ATOMIC_SIZE] = str(plan.size)
        annotations[ANNOTATION_ATOMIC_TIMEOUT] = plan.timeout
        labels[LABEL_ATOMIC_PLAN] = plan.name
    paused = intent.paused or plan is not None
    spec = PodMigrationJobSpec(pod_ref=pod, mode=intent.mode, ttl=intent.ttl, paused=paused)
    return new_job(job_name(intent.idempotency_key), spec, annotations=annotations, labels=labels)


def conflict(existing: PodMigrationJob, intent: MigrationIntent) -> str | None:
    """Why `existing` (found under the intent's job name) is not the job this intent asks for, or None."""
    key = (existing.metadata.annotations or {}).get(ANNOTATION_INTENT_ID)
    if key != intent.idempotency_key:
        return f"job {existing.metadata.name} exists and belongs to another intent ({key!r})"
    ref = existing.spec.pod_ref
    if ref is None or (ref.namespace, ref.name) != (intent.pod.namespace, intent.pod.name):
        where = f"{ref.namespace}/{ref.name}" if ref else "no pod"
        return (
            f"idempotency key {intent.idempotency_key!r} was used for {where}, "
            f"not {intent.pod.namespace}/{intent.pod.name}"
        )
    return None


def _where_from(pod: Mapping[str, Any]) -> dict[str, str]:
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    found = {ANNOTATION_SOURCE_NODE: str(spec["nodeName"])} if spec.get("nodeName") else {}
    owner = next((o for o in meta.get("ownerReferences") or () if o.get("controller")), None)
    if owner is not None:
        found[ANNOTATION_WORKLOAD] = f"{owner.get('kind')}/{owner.get('name')}"
    return found
