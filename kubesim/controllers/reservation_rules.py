"""Koordinator Reservations as koord-scheduler treats them, pure over the objects: which pods a
Reservation's `owners` admit (entries OR-ed; `object`, `controller` and `labelSelector` within one entry
AND-ed), which of them a pod takes first, the room it still holds, what allocating a pod and expiring
write into its status.
"""

from __future__ import annotations

import copy
import functools
import time

from kubesim.apiserver.records import Obj, controller_ref, now_iso, parse_iso
from kubesim.apiserver.selectors import match_label_selector
from kubesim.controllers.node_filters import Usage, add_usage
from shared.api.quantity import format_milli, milli, pod_requests
from shared.core.durations import parse_duration

DEFAULT_RESERVATION_TTL = 24 * 3600.0
HOLDING_PHASES = frozenset({"Available", "Waiting"})
ORDER_LABEL = "scheduling.koordinator.sh/reservation-order"
UNORDERED = 1 << 63  # after every ordered Reservation


def template_spec(reservation: Obj) -> Obj:
    return ((reservation.get("spec") or {}).get("template") or {}).get("spec") or {}


def held(reservation: Obj) -> Usage:
    """Room a Reservation still holds: what it reserves minus what its owners already took."""
    status = reservation.get("status") or {}
    reserved = {k: milli(v) for k, v in (status.get("allocatable") or {}).items()}
    if not reserved:
        reserved = pod_requests(template_spec(reservation))
    allocated = {k: milli(v) for k, v in (status.get("allocated") or {}).items()}
    return {k: max(0, v - allocated.get(k, 0)) for k, v in reserved.items()}


def owners_match(owners: list[Obj], pod: Obj) -> bool:
    meta = pod["metadata"]
    controller = controller_ref(meta)
    return any(owner and _owner_matches(owner, meta, controller) for owner in owners)


def _owner_matches(owner: Obj, meta: Obj, controller: Obj | None) -> bool:
    namespace = meta.get("namespace")
    obj_ref = owner.get("object")
    if obj_ref and not (
        obj_ref.get("name") == meta["name"]
        and obj_ref.get("namespace", namespace) == namespace
        and (not obj_ref.get("uid") or obj_ref["uid"] == meta.get("uid"))
    ):
        return False
    ctrl = owner.get("controller")
    if ctrl:
        if controller is None or ctrl.get("namespace", namespace) != namespace:
            return False
        same_uid = bool(ctrl.get("uid")) and ctrl["uid"] == controller.get("uid")
        same_name = (
            not ctrl.get("uid")
            and ctrl.get("name") == controller.get("name")
            and ctrl.get("kind") == controller.get("kind")
        )
        if not (same_uid or same_name):
            return False
    selector = owner.get("labelSelector")
    return selector is None or match_label_selector(selector, meta.get("labels") or {})


def scheduled(reservation: Obj, node: str, requests: Usage) -> Obj:
    new = copy.deepcopy(reservation)
    status = new.setdefault("status", {})
    status["phase"] = "Available"
    status["nodeName"] = node
    status["allocatable"] = {k: format_milli(v, k) for k, v in requests.items()}
    set_condition(status, {"type": "Scheduled", "status": "True", "reason": "Scheduled"})
    set_condition(status, {"type": "Ready", "status": "True", "reason": "Available"})
    return new


def unschedulable(reservation: Obj, message: str) -> Obj | None:
    """The Reservation marked unschedulable, or None where it already says so."""
    condition = {"type": "Scheduled", "status": "False", "reason": "Unschedulable", "message": message}
    if condition_of(reservation.get("status") or {}, "Scheduled") == condition:
        return None
    new = copy.deepcopy(reservation)
    status = new.setdefault("status", {})
    status["phase"] = "Pending"
    set_condition(status, condition)
    return new


def preference(reservation: Obj) -> tuple[int, str]:
    """Which of the Reservations a pod matches it takes first (koord-scheduler's reservation plugin): the
    lowest positive `scheduling.koordinator.sh/reservation-order`, its node preferred over every other; those
    without one (or 0, or not a number) after them, here by name (koord-scheduler scores their capacity)."""
    labels = reservation["metadata"].get("labels") or {}
    try:
        order = int(labels.get(ORDER_LABEL, ""))
    except ValueError:
        order = 0
    return (order if order > 0 else UNORDERED, reservation["metadata"]["name"])


def allocated(reservation: Obj, pod: Obj) -> Obj:
    """The Reservation with `pod` among its owners and its requests allocated; Succeeded if allocateOnce."""
    updated = copy.deepcopy(reservation)
    status = updated.setdefault("status", {})
    meta = pod["metadata"]
    owners = list(status.get("currentOwners") or [])
    owners.append({"namespace": meta["namespace"], "name": meta["name"], "uid": meta["uid"]})
    status["currentOwners"] = owners
    taken = {k: milli(v) for k, v in (status.get("allocated") or {}).items()}
    add_usage(taken, {k: v for k, v in pod_requests(pod["spec"]).items() if k != "pods"}, +1)
    status["allocated"] = {k: format_milli(v, k) for k, v in taken.items()}
    allocate_once = (updated.get("spec") or {}).get("allocateOnce")
    if allocate_once is None or allocate_once:
        status["phase"] = "Succeeded"
        message = "the reservation has been allocated once"
        set_condition(status, {"type": "Ready", "status": "False", "reason": "Succeeded", "message": message})
    return updated


@functools.lru_cache(maxsize=1 << 16)
def _deadline(expires: str | None, ttl: str | None, created: str) -> float | None:
    """When a Reservation expires (None: never), from its fields as written. Each pass of the scheduler
    asks for every Reservation; the timestamps are parsed once."""
    if expires:
        return parse_iso(expires)
    seconds = parse_duration(ttl) if ttl else DEFAULT_RESERVATION_TTL
    return None if seconds == 0 else parse_iso(created) + seconds


def expired(reservation: Obj, now: float | None = None) -> Obj | None:
    """The Reservation turned Failed (reason Expired) once past its `expires` or `ttl`; None before."""
    if (reservation.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return None
    spec = reservation.get("spec") or {}
    deadline = _deadline(spec.get("expires"), spec.get("ttl"), reservation["metadata"]["creationTimestamp"])
    if deadline is None or (time.time() if now is None else now) < deadline:
        return None
    new = copy.deepcopy(reservation)
    status = new.setdefault("status", {})
    status["phase"] = "Failed"
    condition = {
        "type": "Ready",
        "status": "False",
        "reason": "Expired",
        "message": "the reservation is expired",
    }
    set_condition(status, {**condition, "lastTransitionTime": now_iso()})
    return new


def condition_of(status: Obj, kind: str) -> Obj | None:
    return next((c for c in status.get("conditions") or [] if c.get("type") == kind), None)


def set_condition(status: Obj, condition: Obj) -> None:
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != condition["type"]]
    conditions.append(condition)
    status["conditions"] = conditions


def reserved_pod(reservation: Obj, spec: Obj) -> Obj:
    """The pod a Reservation holds room for, as its template has it (`spec` its template's spec): what
    inter-pod terms and its claims are checked against when the Reservation is placed. Its namespace is
    the template's, `default` if the template names none (koord-scheduler's reserve pod)."""
    meta = (((reservation.get("spec") or {}).get("template") or {}).get("metadata")) or {}
    labels = meta.get("labels") or {}
    identity = {
        "name": reservation["metadata"]["name"],
        "namespace": meta.get("namespace") or "default",
        "labels": labels,
    }
    return {"metadata": identity, "spec": spec}
