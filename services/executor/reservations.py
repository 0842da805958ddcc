"""The Reservation a job creates for its pod's replacement (pure), built as Koordinator's
`CreateOrUpdateReservationOptions` builds it from `reservationOptions.template`, a ReservationTemplateSpec:

- its `metadata` is the Reservation's (labels and annotations kept; Podherd's own labels added and its own
  name per attempt, so each attempt is a Reservation of its own);
- its `spec` is the Reservation's spec (`owners`, `ttl`, `expires`, `taints`, `preAllocation`, ... as
  written); what it leaves out is filled from the pod: `template` (the pod's namespace, labels,
  annotations and spec), `owners` (the pod's controller, with its namespace, or the pod itself when it
  is Pending and unscheduled); `allocateOnce` is always true and the pod template's `nodeName` always
  cleared;
- a required node-affinity term excluding the pod's current node is added to the pod template's every term
  (terms are OR-ed), or, for a job with a target node, the template's `nodeName` is pinned there;
- `ttl` the job's (else the configured default job ttl) unless the template sets a `ttl` or `expires`.
"""

from __future__ import annotations

import copy
from typing import Any

import msgspec

from shared.api.meta import controller_of
from shared.api.names import (
    ANNOTATION_TARGET_NODE,
    LABEL_ATTEMPT,
    LABEL_CONTROLLER,
    LABEL_CREATED_BY,
    LABEL_JOB,
)
from shared.api.pmj import PodMigrationJob
from shared.api.pod import Pod
from shared.api.reservation import is_untaken_room, reservation_name
from shared.core.durations import parse_duration

API_VERSION = "scheduling.koordinator.sh/v1alpha1"


# Koordinator's migration controller labels its Reservations so (with "koord-descheduler").
APP_CREATED_BY = "app.kubernetes.io/created-by"
SERVER_WRITTEN = frozenset(
    {"namespace", "uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp",
     "deletionGracePeriodSeconds", "managedFields", "selfLink"}
)  # fmt: skip


def reservation_for(job: PodMigrationJob, pod: Pod, default_ttl: str, *, attempt: int = 1) -> dict[str, Any]:
    """The Reservation for the job's `attempt`, made from its template or its pod as Koordinator's migration
    controller makes it, but for the `reservation-order` label, which Podherd does not stamp: koord-scheduler
    v1.8.0 prefers the node of the lowest-order Reservation of a workload even once a sibling took it
    (allocateOnce), and the replacement then lands there outside any room."""
    job_name = job.metadata.name or ""
    options = job.spec.reservation_options
    given = options.template if options is not None else None
    meta: dict[str, Any] = copy.deepcopy(given.metadata or {}) if given is not None else {}
    spec: dict[str, Any] = copy.deepcopy(given.spec or {}) if given is not None else {}
    template = spec.get("template") or _pod_template(pod)
    pod_spec = template.setdefault("spec", {})
    pod_spec.pop("nodeName", None)
    target = (job.metadata.annotations or {}).get(ANNOTATION_TARGET_NODE)
    if target:
        pod_spec["nodeName"] = target
    elif pod.spec.get("nodeName"):
        _exclude_node(pod_spec, pod.spec["nodeName"])
    spec["template"] = template
    if not spec.get("owners"):
        spec["owners"] = [_owner(pod)]
    spec["allocateOnce"] = True
    ttl = job.spec.ttl if job.spec.ttl is not None else default_ttl
    if not spec.get("ttl") and not spec.get("expires") and parse_duration(ttl) > 0:
        spec["ttl"] = ttl  # a job without a ttl (0) leaves the Reservation's to its CRD's default
    labels = {
        **(meta.get("labels") or {}),
        APP_CREATED_BY: "podherd",
        LABEL_CREATED_BY: "podherd",
        LABEL_JOB: job_name,
        LABEL_ATTEMPT: str(attempt),
        LABEL_CONTROLLER: _controller_uid(pod),
    }
    # The template's whole metadata, as Koordinator keeps it (finalizers, owner references, ...), but what
    # the API server writes or a cluster-scoped object cannot have; the name is the attempt's.
    metadata = {k: v for k, v in meta.items() if k not in SERVER_WRITTEN}
    metadata.update(name=reservation_name(job_name, attempt), labels=labels)
    return {"apiVersion": API_VERSION, "kind": "Reservation", "metadata": metadata, "spec": spec}


def _pod_template(pod: Pod) -> dict[str, Any]:
    """The pod as a pod template: its namespace (where the scheduler looks up its claims and matches its
    inter-pod terms; `default` if left out), labels, annotations and spec."""
    meta = pod.metadata
    return {
        "metadata": {
            "namespace": meta.namespace,
            "labels": dict(meta.labels or {}),
            "annotations": dict(meta.annotations or {}),
        },
        "spec": copy.deepcopy(pod.spec),
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
