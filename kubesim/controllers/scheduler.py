"""The scheduler: binds pending pods to nodes and schedules Reservations the way koord-scheduler does.

Filtering: resource requests against allocatable minus what bound pods and held Reservations use;
nodeSelector; required node affinity (matchExpressions and matchFields); taints and tolerations, with
cordoned and NotReady nodes tainted as the node lifecycle controller taints them. Scoring: least- or
most-allocated.

Reservations (koord-scheduler): a Reservation is scheduled like a pod from its template (honouring the
template's nodeName, affinity and tolerations) and then holds that room: other pods cannot use it. A new pod
of a reservation-aware scheduler that matches the Reservation's `owners` (entries OR-ed; `object`,
`controller`, `labelSelector` inside one entry AND-ed) is placed into the room on that node, annotated
`scheduling.koordinator.sh/reservation-allocated`, recorded in `status.currentOwners` / `allocated`, and with
`allocateOnce` the Reservation becomes Succeeded. A Reservation past its `ttl` (default 24h) or `expires`
becomes Failed (`Ready=False`, reason Expired) and frees its room.

Usage per node is kept incrementally from store events, so one scheduling decision costs O(nodes), not
O(pods).
"""

from __future__ import annotations

import copy
import json
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from kubesim.controllers.base import Controller
from kubesim.options import SimOptions
from kubesim.selectors import match_label_selector
from kubesim.store import Event, Obj, Store, now_iso, parse_iso
from shared.api import annotations as known
from shared.durations import parse_duration
from shared.quantity import format_milli, milli, pod_requests

RESERVATION_ALLOCATED = known.RESERVATION_ALLOCATED
RESERVATION_AWARE = frozenset({"koord-scheduler"})
HOLDING_PHASES = frozenset({"Available", "Waiting"})
TERMINAL = frozenset({"Succeeded", "Failed"})
DEFAULT_RESERVATION_TTL = 24 * 3600.0

Usage = dict[str, int]


def _add(target: Usage, delta: Mapping[str, int], sign: int) -> None:
    for name, value in delta.items():
        target[name] = target.get(name, 0) + sign * value


class Scheduler(Controller[tuple[str, str]]):
    tick = 0.2

    def __init__(self, store: Store, options: SimOptions) -> None:
        super().__init__(store, options)
        self.pods = self.rt("", "v1", "pods")
        self.nodes = self.rt("", "v1", "nodes")
        self.events_rt = self.rt("", "v1", "events")
        self.used: dict[str, Usage] = defaultdict(dict)
        self._contrib: dict[tuple[str, str, str], tuple[str, Usage]] = {}
        self.pending_pods: set[tuple[str, str]] = set()
        self.pending_reservations: set[str] = set()
        self.available_reservations: set[str] = set()
        self.holding_reservations: set[str] = set()
        self._reported: dict[tuple[str, str, str], str] = {}

    @property
    def reservations(self) -> Any:
        return self.store.registry.get("scheduling.koordinator.sh", "v1alpha1", "reservations")

    # ----------------------------------------------------------------------------------------------------
    # Bookkeeping from events

    def on_event(self, event: Event) -> bool:
        rt = event.rt
        if rt.group == "" and rt.plural == "pods":
            return self._pod_event(event)
        if rt.group == "scheduling.koordinator.sh" and rt.plural == "reservations":
            return self._reservation_event(event)
        return rt.group == "" and rt.plural == "nodes"

    def _pod_event(self, event: Event) -> bool:
        pod = event.obj
        meta, spec = pod["metadata"], pod.get("spec") or {}
        key = (meta.get("namespace", ""), meta["name"])
        phase = (pod.get("status") or {}).get("phase")
        node = spec.get("nodeName")
        if event.type != "DELETED" and node and phase not in TERMINAL:
            self._set_contrib(("pod", *key), node, pod_requests(spec))
        else:
            self._set_contrib(("pod", *key), None, {})
        if (
            event.type != "DELETED"
            and not node
            and not meta.get("deletionTimestamp")
            and phase not in TERMINAL
            and (spec.get("schedulerName", "default-scheduler") in self.options.scheduler_names)
        ):
            self.pending_pods.add(key)
            return True
        self.pending_pods.discard(key)
        # Room freed (a pod gone, finished or moved) may let a pending pod or Reservation fit.
        return (
            event.type == "DELETED"
            or phase in TERMINAL
            or bool(self.pending_pods or self.pending_reservations)
        )

    def _reservation_event(self, event: Event) -> bool:
        obj = event.obj
        name = obj["metadata"]["name"]
        status = obj.get("status") or {}
        phase = status.get("phase") or "Pending"
        gone = event.type == "DELETED"
        if not gone and phase in HOLDING_PHASES and status.get("nodeName"):
            self._set_contrib(("reservation", "", name), status["nodeName"], self._held(obj))
            self.holding_reservations.add(name)
        else:
            self._set_contrib(("reservation", "", name), None, {})
            self.holding_reservations.discard(name)
        if not gone and phase == "Available" and not (obj.get("spec") or {}).get("unschedulable"):
            self.available_reservations.add(name)
        else:
            self.available_reservations.discard(name)
        if not gone and phase == "Pending" and not obj["metadata"].get("deletionTimestamp"):
            self.pending_reservations.add(name)
        else:
            self.pending_reservations.discard(name)
        return True

    def _held(self, reservation: Obj) -> Usage:
        """Room a Reservation still holds: what it reserves minus what its owners already took."""
        status = reservation.get("status") or {}
        reserved = {k: milli(v) for k, v in (status.get("allocatable") or {}).items()}
        if not reserved:
            reserved = pod_requests(((reservation.get("spec") or {}).get("template") or {}).get("spec") or {})
        allocated = {k: milli(v) for k, v in (status.get("allocated") or {}).items()}
        return {k: max(0, v - allocated.get(k, 0)) for k, v in reserved.items()}

    def _set_contrib(self, key: tuple[str, str, str], node: str | None, usage: Usage) -> None:
        old = self._contrib.pop(key, None)
        if old is not None:
            _add(self.used[old[0]], old[1], -1)
        if node is not None:
            self._contrib[key] = (node, usage)
            _add(self.used[node], usage, +1)

    # ----------------------------------------------------------------------------------------------------
    # Scheduling passes

    def periodic(self) -> None:
        self._expire_reservations()
        if not self.pending_pods and not self.pending_reservations:
            return
        nodes = list(self.store.objects(self.nodes))
        work: list[tuple[int, str, str, tuple[str, str, str]]] = []
        for ns, name in list(self.pending_pods):
            pod = self.store.find(self.pods, ns, name)
            if pod is None:
                self.pending_pods.discard((ns, name))
                continue
            prio = int((pod.get("spec") or {}).get("priority") or 0)
            work.append(
                (-prio, pod["metadata"].get("creationTimestamp", ""), f"{ns}/{name}", ("pod", ns, name))
            )
        rts = self.reservations
        for name in list(self.pending_reservations):
            obj = self.store.find(rts, "", name) if rts else None
            if obj is None:
                self.pending_reservations.discard(name)
                continue
            tmpl_spec = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
            prio = int(tmpl_spec.get("priority") or 0)
            work.append(
                (-prio, obj["metadata"].get("creationTimestamp", ""), name, ("reservation", "", name))
            )
        work.sort(key=lambda item: (item[0], item[1], item[2]))
        for _, _, _, item in work:
            kind, ns, name = item
            if kind == "pod":
                self._schedule_pod(ns, name, nodes)
            else:
                self._schedule_reservation(name, nodes)

    def _schedule_pod(self, namespace: str, name: str, nodes: list[Obj]) -> None:
        pod = self.store.find(self.pods, namespace, name)
        if pod is None or (pod.get("spec") or {}).get("nodeName"):
            return
        spec = pod["spec"]
        requests = pod_requests(spec)
        if spec.get("schedulerName") in RESERVATION_AWARE:
            for reservation in self._matching_reservations(pod):
                node_name = reservation["status"]["nodeName"]
                node = next((n for n in nodes if n["metadata"]["name"] == node_name), None)
                if node is None or self._reject(spec, node) is not None:
                    continue
                bonus = self._held(reservation)
                if self._fits(node, requests, bonus):
                    self._bind(pod, node_name, reservation)
                    return
        best, reasons = self._pick(spec, requests, nodes)
        if best is None:
            self._unschedulable_pod(pod, reasons, len(nodes))
            return
        self._bind(pod, best, None)

    def _schedule_reservation(self, name: str, nodes: list[Obj]) -> None:
        rts = self.reservations
        reservation = self.store.find(rts, "", name) if rts else None
        if reservation is None or (reservation.get("status") or {}).get("phase") not in (None, "Pending"):
            return
        spec = ((reservation.get("spec") or {}).get("template") or {}).get("spec") or {}
        requests = pod_requests(spec)
        requests.pop("pods", None)
        best, reasons = self._pick(spec, requests, nodes)
        new = copy.deepcopy(reservation)
        status = new.setdefault("status", {})
        if best is None:
            message = self._reason_message(reasons, len(nodes))
            condition = {
                "type": "Scheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": message,
            }
            if _condition(status, "Scheduled") == condition:
                return
            status["phase"] = "Pending"
            _set_condition(status, condition)
            self.store.put(rts, new, "MODIFIED", old=reservation)
            return
        status["phase"] = "Available"
        status["nodeName"] = best
        status["allocatable"] = {k: format_milli(v, k) for k, v in requests.items()}
        _set_condition(status, {"type": "Scheduled", "status": "True", "reason": "Scheduled"})
        _set_condition(status, {"type": "Ready", "status": "True", "reason": "Available"})
        self.store.put(rts, new, "MODIFIED", old=reservation)

    # ----------------------------------------------------------------------------------------------------
    # Filtering and scoring

    def _pick(self, spec: Obj, requests: Usage, nodes: Iterable[Obj]) -> tuple[str | None, dict[str, int]]:
        pinned = spec.get("nodeName")
        reasons: dict[str, int] = defaultdict(int)
        best: tuple[float, str] | None = None
        for node in nodes:
            name = node["metadata"]["name"]
            if pinned and name != pinned:
                reasons["node(s) didn't match the requested node name"] += 1
                continue
            rejected = self._reject(spec, node)
            if rejected is None:
                rejected = self._insufficient(node, requests)
            if rejected is not None:
                reasons[rejected] += 1
                continue
            score = self._score(node, requests)
            if best is None or (score, name) < best:
                best = (score, name)
        return (best[1] if best else None), reasons

    def _allocatable(self, node: Obj) -> Usage:
        status = node.get("status") or {}
        values = status.get("allocatable") or status.get("capacity") or {}
        return {k: milli(v) for k, v in values.items()}

    def _insufficient(self, node: Obj, requests: Usage, bonus: Usage | None = None) -> str | None:
        allocatable = self._allocatable(node)
        used = self.used.get(node["metadata"]["name"], {})
        for name, value in requests.items():
            if value <= 0:
                continue
            free = allocatable.get(name, 0) - used.get(name, 0) + (bonus or {}).get(name, 0)
            if value > free:
                return "Too many pods" if name == "pods" else f"Insufficient {name}"
        return None

    def _fits(self, node: Obj, requests: Usage, bonus: Usage) -> bool:
        return self._insufficient(node, requests, bonus) is None

    def _score(self, node: Obj, requests: Usage) -> float:
        allocatable = self._allocatable(node)
        used = self.used.get(node["metadata"]["name"], {})
        fractions = [
            (used.get(r, 0) + requests.get(r, 0)) / allocatable[r]
            for r in ("cpu", "memory")
            if allocatable.get(r)
        ]
        fill = sum(fractions) / len(fractions) if fractions else 0.0
        # Lower is better: least-allocated prefers empty nodes, most-allocated full ones.
        return fill if self.options.score == "least-allocated" else -fill

    def _reject(self, spec: Obj, node: Obj) -> str | None:
        labels = node["metadata"].get("labels") or {}
        for key, value in (spec.get("nodeSelector") or {}).items():
            if labels.get(key) != value:
                return "node(s) didn't match Pod's node affinity/selector"
        required = (
            ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
                "requiredDuringSchedulingIgnoredDuringExecution"
            )
            or {}
        ).get("nodeSelectorTerms")
        if required and not any(_term_matches(term, node) for term in required):
            return "node(s) didn't match Pod's node affinity/selector"
        taints = list((node.get("spec") or {}).get("taints") or [])
        if (node.get("spec") or {}).get("unschedulable"):
            taints.append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"})
        if not node_ready(node):
            taints.append({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"})
        tolerations = spec.get("tolerations") or []
        for taint in taints:
            if taint.get("effect") in ("NoSchedule", "NoExecute") and not any(
                _tolerates(t, taint) for t in tolerations
            ):
                if taint["key"] == "node.kubernetes.io/unschedulable":
                    return "node(s) were unschedulable"
                if taint["key"] == "node.kubernetes.io/not-ready":
                    return "node(s) had untolerated taint {node.kubernetes.io/not-ready: }"
                return f"node(s) had untolerated taint {{{taint['key']}: {taint.get('value', '')}}}"
        return None

    # ----------------------------------------------------------------------------------------------------
    # Reservations

    def _matching_reservations(self, pod: Obj) -> list[Obj]:
        rts = self.reservations
        if rts is None:
            return []
        found = []
        for name in sorted(self.available_reservations):
            reservation = self.store.find(rts, "", name)
            if reservation is not None and owners_match(
                (reservation.get("spec") or {}).get("owners") or [], pod
            ):
                found.append(reservation)
        return found

    def _bind(self, pod: Obj, node: str, reservation: Obj | None) -> None:
        new = copy.deepcopy(pod)
        new["spec"]["nodeName"] = node
        status = new.setdefault("status", {})
        _set_condition(status, {"type": "PodScheduled", "status": "True", "lastTransitionTime": now_iso()})
        if reservation is not None:
            new["metadata"].setdefault("annotations", {})[RESERVATION_ALLOCATED] = json.dumps(
                {"name": reservation["metadata"]["name"], "uid": reservation["metadata"]["uid"]},
                separators=(",", ":"),
            )
        rts = self.reservations
        if reservation is not None and rts is not None:
            # Allocate first: the pod's contribution then replaces the Reservation's within one pass.
            updated = copy.deepcopy(reservation)
            rstatus = updated.setdefault("status", {})
            owners = list(rstatus.get("currentOwners") or [])
            owners.append(
                {
                    "namespace": pod["metadata"]["namespace"],
                    "name": pod["metadata"]["name"],
                    "uid": pod["metadata"]["uid"],
                }
            )
            rstatus["currentOwners"] = owners
            allocated = {k: milli(v) for k, v in (rstatus.get("allocated") or {}).items()}
            _add(allocated, {k: v for k, v in pod_requests(pod["spec"]).items() if k != "pods"}, +1)
            rstatus["allocated"] = {k: format_milli(v, k) for k, v in allocated.items()}
            allocate_once = (updated.get("spec") or {}).get("allocateOnce")
            if allocate_once is None or allocate_once:
                rstatus["phase"] = "Succeeded"
                _set_condition(
                    rstatus,
                    {
                        "type": "Ready",
                        "status": "False",
                        "reason": "Succeeded",
                        "message": "the reservation has been allocated once",
                    },
                )
            self.store.put(rts, updated, "MODIFIED", old=reservation)
        self.store.put(self.pods, new, "MODIFIED", old=pod)
        self._record(
            pod,
            "Normal",
            "Scheduled",
            f"Successfully assigned {pod['metadata']['namespace']}/{pod['metadata']['name']} to {node}",
        )

    def _expire_reservations(self) -> None:
        rts = self.reservations
        if rts is None:
            return
        now = time.time()
        for reservation in list(self.store.objects(rts)):
            status = reservation.get("status") or {}
            if status.get("phase") in ("Succeeded", "Failed"):
                continue
            spec = reservation.get("spec") or {}
            if spec.get("expires"):
                deadline = parse_iso(spec["expires"])
            else:
                ttl = parse_duration(spec["ttl"]) if spec.get("ttl") else DEFAULT_RESERVATION_TTL
                if ttl == 0:
                    continue
                deadline = parse_iso(reservation["metadata"]["creationTimestamp"]) + ttl
            if now < deadline:
                continue
            new = copy.deepcopy(reservation)
            nstatus = new.setdefault("status", {})
            nstatus["phase"] = "Failed"
            _set_condition(
                nstatus,
                {
                    "type": "Ready",
                    "status": "False",
                    "reason": "Expired",
                    "message": "the reservation is expired",
                    "lastTransitionTime": now_iso(),
                },
            )
            self.store.put(rts, new, "MODIFIED", old=reservation)

    # ----------------------------------------------------------------------------------------------------
    # Reporting

    def _reason_message(self, reasons: Mapping[str, int], total: int) -> str:
        parts = ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items()))
        return f"0/{total} nodes are available: {parts}." if parts else f"0/{total} nodes are available."

    def _unschedulable_pod(self, pod: Obj, reasons: Mapping[str, int], total: int) -> None:
        message = self._reason_message(reasons, total)
        condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
        status = pod.get("status") or {}
        current = _condition(status, "PodScheduled")
        if current and {k: current.get(k) for k in condition} == condition:
            return
        new = copy.deepcopy(pod)
        _set_condition(new.setdefault("status", {}), {**condition, "lastTransitionTime": now_iso()})
        self.store.put(self.pods, new, "MODIFIED", old=pod)
        self._record(pod, "Warning", "FailedScheduling", message)

    def _record(self, obj: Obj, kind: str, reason: str, message: str) -> None:
        if not self.options.record_events:
            return
        record_event(self.store, self.events_rt, obj, kind, reason, message, "default-scheduler")


def record_event(
    store: Store, events_rt: Any, obj: Obj, kind: str, reason: str, message: str, component: str
) -> None:
    meta = obj["metadata"]
    namespace = meta.get("namespace") or "default"
    stamp = now_iso()
    store.put(
        events_rt,
        {
            "metadata": {
                "name": f"{meta['name']}.{store.rv + 1:x}",
                "namespace": namespace,
                "uid": f"ev-{store.rv + 1}",
                "creationTimestamp": stamp,
            },
            "involvedObject": {
                "kind": obj.get("kind"),
                "apiVersion": obj.get("apiVersion"),
                "name": meta["name"],
                "namespace": meta.get("namespace"),
                "uid": meta.get("uid"),
            },
            "reason": reason,
            "message": message,
            "type": kind,
            "source": {"component": component},
            "reportingComponent": component,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        },
        "ADDED",
    )


def node_ready(node: Obj) -> bool:
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True")
    return True


def owners_match(owners: list[Obj], pod: Obj) -> bool:
    meta = pod["metadata"]
    controller = next((r for r in meta.get("ownerReferences") or [] if r.get("controller")), None)
    for owner in owners:
        if not owner:
            continue
        ok = True
        obj_ref = owner.get("object")
        if obj_ref:
            ok &= (
                obj_ref.get("name") == meta["name"]
                and obj_ref.get("namespace", meta.get("namespace")) == meta.get("namespace")
                and (not obj_ref.get("uid") or obj_ref["uid"] == meta.get("uid"))
            )
        ctrl = owner.get("controller")
        if ctrl:
            ok &= (
                controller is not None
                and (
                    (ctrl.get("uid") and ctrl["uid"] == controller.get("uid"))
                    or (
                        not ctrl.get("uid")
                        and ctrl.get("name") == controller.get("name")
                        and ctrl.get("kind") == controller.get("kind")
                    )
                )
                and ctrl.get("namespace", meta.get("namespace")) == meta.get("namespace")
            )
        selector = owner.get("labelSelector")
        if selector is not None:
            ok &= match_label_selector(selector, meta.get("labels") or {})
        if ok:
            return True
    return False


def _term_matches(term: Obj, node: Obj) -> bool:
    labels = node["metadata"].get("labels") or {}
    for expr in term.get("matchExpressions") or []:
        if not _expr_matches(expr, labels.get(expr["key"]), expr["key"] in labels):
            return False
    for expr in term.get("matchFields") or []:
        value = node["metadata"]["name"] if expr["key"] == "metadata.name" else None
        if not _expr_matches(expr, value, value is not None):
            return False
    return bool(term.get("matchExpressions") or term.get("matchFields"))


def _expr_matches(expr: Obj, value: str | None, present: bool) -> bool:
    op, values = expr.get("operator"), expr.get("values") or []
    if op == "In":
        return present and value in values
    if op == "NotIn":
        return not present or value not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and value is not None and values:
        try:
            return int(value) > int(values[0]) if op == "Gt" else int(value) < int(values[0])
        except ValueError:
            return False
    return False


def _tolerates(toleration: Obj, taint: Obj) -> bool:
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("operator") == "Exists":
        return not toleration.get("key") or toleration["key"] == taint["key"]
    return bool(
        toleration.get("key") == taint["key"] and toleration.get("value", "") == taint.get("value", "")
    )


def _condition(status: Obj, kind: str) -> Obj | None:
    return next((c for c in status.get("conditions") or [] if c.get("type") == kind), None)


def _set_condition(status: Obj, condition: Obj) -> None:
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != condition["type"]]
    conditions.append(condition)
    status["conditions"] = conditions


__all__ = ["Scheduler", "SimOptions", "node_ready", "owners_match", "record_event"]
