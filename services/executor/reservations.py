"""The Reservation a job creates for its pod's replacement (pure), built as Koordinator builds it.

- template: the pod's metadata (labels, annotations) and spec with `nodeName` cleared, merged with
  `reservationOptions.template` when the job gives one;
- a required node-affinity term excluding the pod's current node (added to every existing term, since terms
  are OR-ed), or, for a job with a target node (seed 002), `nodeName` pinned there;
- owners: the pod's controller (with its namespace), or the pod itself when it is Pending and unscheduled;
- `allocateOnce: true`; ttl the job's unless the template sets one; a name derived from the job (its own);
  labels saying Podherd created it, for which job.
"""

from __future__ import annotations

import copy
from typing import Any

import msgspec

from shared.api.meta import controller_of
from shared.api.pmj import ANNOTATION_TARGET_NODE, PodMigrationJob
from shared.api.pod import Pod
from shared.api.reservation import (
    LABEL_ATTEMPT,
    LABEL_CONTROLLER,
    LABEL_CREATED_BY,
    LABEL_JOB,
    is_untaken_room,
    reservation_name,
)

API_VERSION = "scheduling.koordinator.sh/v1alpha1"


def reservation_for(job: PodMigrationJob, pod: Pod, default_ttl: str, *, attempt: int = 1) -> dict[str, Any]:
    job_name = job.metadata.name or ""
    meta = pod.metadata
    spec = copy.deepcopy(pod.spec)
    node = spec.pop("nodeName", None)
    template: dict[str, Any] = {
        "metadata": {"labels": dict(meta.labels or {}), "annotations": dict(meta.annotations or {})},
        "spec": spec,
    }
    options = job.spec.reservation_options
    extra = options.template if options is not None else None
    ttl = job.spec.ttl or default_ttl
    if extra is not None:
        template["metadata"].update(extra.metadata or {})
        template["spec"].update(extra.spec or {})
    target = (job.metadata.annotations or {}).get(ANNOTATION_TARGET_NODE)
    if target:
        template["spec"]["nodeName"] = target
    elif node:
        _exclude_node(template["spec"], node)
    reservation_spec: dict[str, Any] = {
        "template": template,
        "owners": [_owner(pod)],
        "allocateOnce": True,
        "ttl": ttl,
    }
    if extra is not None and extra.spec and extra.spec.get("ttl"):
        reservation_spec["ttl"] = extra.spec["ttl"]
    return {
        "apiVersion": API_VERSION,
        "kind": "Reservation",
        "metadata": {
            "name": reservation_name(job_name, attempt),
            "labels": {
                LABEL_CREATED_BY: "podherd",
                LABEL_JOB: job_name,
                LABEL_ATTEMPT: str(attempt),
                LABEL_CONTROLLER: _controller_uid(pod),
            },
        },
        "spec": reservation_spec,
    }


def _owner(pod: Pod) -> dict[str, Any]:
    meta = pod.metadata
    controller = controller_of(meta)
    if controller is None or pod.unscheduled:
        return {"object": {"kind": "Pod", "namespace": meta.namespace, "name": meta.name, "uid": meta.uid}}
    return {"controller": {**msgspec.to_builtins(controller), "namespace": meta.namespace}}


def _controller_uid(pod: Pod) -> str:
    controller = controller_of(pod.metadata)
    return (controller.uid if controller is not None else None) or pod.metadata.uid or ""


def _exclude_node(spec: dict[str, Any], node: str) -> None:
    exclusion = {"key": "metadata.name", "operator": "NotIn", "values": [node]}
    affinity = spec.setdefault("affinity", {})
    node_affinity = affinity.setdefault("nodeAffinity", {})
    required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.get("nodeSelectorTerms") or [{}]
    for term in terms:
        term["matchFields"] = [*(term.get("matchFields") or []), exclusion]
    required["nodeSelectorTerms"] = terms


def to_delete(reservations: list[dict[str, Any]], keep_untaken: bool) -> list[str]:
    """Which of an ended job's Reservations go (pure): all of them, or, while a sibling of the workload is
    in flight, all but the room no pod took (a replacement may take any job's room of the workload, so the
    job may have moved through a sibling's room, and that sibling's replacement now needs this one)."""
    return [r["metadata"]["name"] for r in reservations if not (keep_untaken and is_untaken_room(r))]
