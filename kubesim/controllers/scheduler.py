"""The scheduler: binds pending pods to nodes and schedules Reservations the way koord-scheduler does.

Nodes are filtered and scored as `node_filters` says. A Reservation (`reservation_rules`) is scheduled like a
pod from its template (honouring the template's nodeName, affinity and tolerations) and then holds that
room: other pods cannot use it. A new pod of a reservation-aware scheduler that matches the Reservation's
`owners` is placed into the room on that node, annotated `scheduling.koordinator.sh/reservation-allocated`,
recorded in `status.currentOwners` / `allocated`, and with `allocateOnce` the Reservation becomes
Succeeded. A Reservation past its `ttl` (default 24h) or `expires` becomes Failed (`Ready=False`, reason
Expired) and frees its room.

Usage per node is kept incrementally from store events, so one scheduling decision costs O(nodes), not
O(pods).
"""

from __future__ import annotations

import copy
import functools
import json
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from kubesim.apiserver import managed_fields
from kubesim.apiserver.records import Event, Obj, now_iso
from kubesim.apiserver.store import Store
from kubesim.controllers import node_filters, node_scores, pod_topology
from kubesim.controllers import reservation_rules as reservations
from kubesim.controllers.base import Controller
from kubesim.controllers.node_filters import Usage
from kubesim.controllers.node_search import feasible_nodes_to_find, search
from kubesim.controllers.recorder import record_event
from kubesim.controllers.scheduler_cache import NodeUsage, SchedulerCache
from kubesim.controllers.volume_rules import Claim, node_conflict
from kubesim.controllers.volumes import VolumeBinder
from kubesim.options import SimOptions
from shared.api import annotations as known
from shared.api.quantity import pod_requests

RESERVATION_ALLOCATED = known.RESERVATION_ALLOCATED

RESERVATION_AWARE = frozenset({"koord-scheduler"})
TERMINAL = frozenset({"Succeeded", "Failed"})


def _fit(
    usage: NodeUsage,
    spec: Obj,
    requests: Usage,
    *,
    policy: str,
    filters: list[Callable[[Obj], str | None]],
) -> Callable[[Obj], tuple[tuple[str, ...], float]]:
    """Why a node cannot take the pod (the first refusing filter's reasons; none: it can), and its score for
    it. `filters`, in kube-scheduler's order after the node's own and its room: the volume filters, when the
    pod has claims, and the spread and inter-pod affinity filters, when the pod's or the placed pods'
    terms ask for them."""

    def fit(node: Obj) -> tuple[tuple[str, ...], float]:
        used = usage.on(node["metadata"]["name"])
        rejected = node_filters.reject(spec, node)
        if rejected is not None:
            return (rejected,), 0.0
        short = node_filters.insufficient(node, used, requests)
        if short:
            return short, 0.0
        for check in filters:
            rejected = check(node)
            if rejected is not None:
                return (rejected,), 0.0
        return (), node_filters.score(node, used, requests, policy=policy)

    return fit


def _queue(
    store: Store, cache: SchedulerCache, *, pods: Any, reservations_rt: Any
) -> list[tuple[int, str, str, tuple[str, str, str]]]:
    """The pods and Reservations waiting, each keyed by its priority (highest first) and age; those gone
    leave the cache's pending sets."""
    work: list[tuple[int, str, str, tuple[str, str, str]]] = []
    for ns, name in list(cache.pending_pods):
        pod = store.find(pods, ns, name)
        if pod is None:
            cache.pending_pods.discard((ns, name))
            continue
        prio = int((pod.get("spec") or {}).get("priority") or 0)
        work.append((-prio, pod["metadata"].get("creationTimestamp", ""), f"{ns}/{name}", ("pod", ns, name)))
    for name in list(cache.pending_reservations):
        obj = store.find(reservations_rt, "", name) if reservations_rt else None
        if obj is None:
            cache.pending_reservations.discard(name)
            continue
        prio = int(reservations.template_spec(obj).get("priority") or 0)
        work.append((-prio, obj["metadata"].get("creationTimestamp", ""), name, ("reservation", "", name)))
    return work


class Scheduler(Controller[tuple[str, str]]):
    tick = 0.2

    def __init__(self, store: Store, options: SimOptions) -> None:
        super().__init__(store, options)
        self.pods = self.rt("", "v1", "pods")
        self.nodes = self.rt("", "v1", "nodes")
        self.events_rt = self.rt("", "v1", "events")
        self.cache = SchedulerCache(options)
        self.volumes = VolumeBinder(store)
        self.all_pods = functools.partial(store.objects, self.pods)
        self._next_start = 0  # where the next search for feasible nodes starts (kube-scheduler's)

    @property
    def reservations(self) -> Any:
        return self.store.registry.get("scheduling.koordinator.sh", "v1alpha1", "reservations")

    def on_event(self, event: Event) -> bool:
        return self.cache.on_event(event)

    # ----------------------------------------------------------------------------------------------------
    # Scheduling passes

    def periodic(self) -> None:
        self._expire_reservations()
        if not self.cache.pending_pods and not self.cache.pending_reservations:
            return
        nodes = list(self.store.objects(self.nodes))
        work = _queue(self.store, self.cache, pods=self.pods, reservations_rt=self.reservations)
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
        if spec.get("schedulingGates"):
            return  # the SchedulingGates plugin: not queued until every gate is removed
        requests = pod_requests(spec)
        claims = self.volumes.claims_of(pod)
        if spec.get("schedulerName") in RESERVATION_AWARE and not isinstance(claims, str):
            available = self.volumes.available_for(claims)
            for reservation in self._matching_reservations(pod):
                node_name = reservation["status"]["nodeName"]
                node = self.store.find(self.nodes, "", node_name)
                if node is None or (
                    node_filters.reject(spec, node) or node_conflict(claims, node, available)
                ):
                    continue
                bonus = reservations.held(reservation)
                if not node_filters.insufficient(node, self.cache.usage.on(node_name), requests, bonus=bonus):
                    self._bind(pod, node, reservation, claims=claims)
                    return
        best, why = self._pick(spec, requests, nodes, pod=pod, claims=claims)
        node = self.store.find(self.nodes, "", best) if best is not None else None
        if node is None or isinstance(claims, str):
            self._unschedulable_pod(pod, why)
            return
        self._bind(pod, node, None, claims=claims)

    def _schedule_reservation(self, name: str, nodes: list[Obj]) -> None:
        rts = self.reservations
        reservation = self.store.find(rts, "", name) if rts else None
        if reservation is None or (reservation.get("status") or {}).get("phase") not in (None, "Pending"):
            return
        spec = reservations.template_spec(reservation)
        requests = pod_requests(spec)
        requests.pop("pods", None)
        reserved = reservations.reserved_pod(reservation, spec)
        claims = self.volumes.claims_of(reserved)
        best, why = self._pick(spec, requests, nodes, pod=reserved, claims=claims)
        if best is None:
            new = reservations.unschedulable(reservation, why)
        else:
            new = reservations.scheduled(reservation, best, requests)
        if new is not None:
            self.store.put(rts, new, "MODIFIED", old=reservation)

    def _pick(
        self, spec: Obj, requests: Usage, nodes: list[Obj], *, pod: Obj, claims: list[Claim] | str
    ) -> tuple[str | None, str]:
        """The best node of the feasible ones a search finds (`node_search`); without one, why not, as
        kube-scheduler words it (its PreFilter's one reason, or the count of each node's)."""
        total = len(nodes)
        if isinstance(claims, str):
            return None, f"0/{total} nodes are available: {claims}."
        fit = fit_for(self, spec, requests, nodes=nodes, pod=pod, claims=claims)
        pinned = spec.get("nodeName")
        reasons: dict[str, int] = defaultdict(int)
        if pinned:  # only that node can take it (koord-scheduler filters the others out first)
            node = self.store.find(self.nodes, "", pinned)
            others = len(nodes) - (1 if node is not None else 0)
            if others:
                reasons["node(s) didn't match the requested node name"] = others
            nodes = [node] if node is not None else []
        wanted = feasible_nodes_to_find(len(nodes), self.options.percentage_of_nodes_to_score)
        start = self._next_start % len(nodes) if nodes else 0
        found, examined = search(nodes, fit, start=start, wanted=wanted, reasons=reasons)
        if not pinned and nodes:
            self._next_start = (start + examined) % len(nodes)
        prefers = (
            node_scores.preferences(pod, [n for _, n in found], every=nodes, pods=self.all_pods)
            if len(found) > 1
            else None
        )
        best = node_scores.best(found, prefers)
        return best, node_filters.unavailable_message(reasons, total)

    # ----------------------------------------------------------------------------------------------------
    # Reservations

    def _matching_reservations(self, pod: Obj) -> list[Obj]:
        rts = self.reservations
        if rts is None:
            return []
        found = []
        for name in sorted(self.cache.available_reservations):
            reservation = self.store.find(rts, "", name)
            owners = ((reservation or {}).get("spec") or {}).get("owners") or []
            if reservation is not None and reservations.owners_match(owners, pod):
                found.append(reservation)
        return sorted(found, key=reservations.preference)

    def _bind(self, pod: Obj, node_obj: Obj, reservation: Obj | None, *, claims: list[Claim]) -> None:
        """Bind the pod (its delayed claims first, on the node, as VolumeBinding's PreBind does)."""
        node = node_obj["metadata"]["name"]
        if any(c.delayed for c in claims):
            self.volumes.bind_on(claims, node_obj)
        new = copy.deepcopy(pod)
        new["spec"]["nodeName"] = node
        status = new.setdefault("status", {})
        scheduled = {"type": "PodScheduled", "status": "True", "lastTransitionTime": now_iso()}
        reservations.set_condition(status, scheduled)
        rts = self.reservations
        if reservation is not None and rts is not None:
            new["metadata"].setdefault("annotations", {})[RESERVATION_ALLOCATED] = json.dumps(
                {"name": reservation["metadata"]["name"], "uid": reservation["metadata"]["uid"]},
                separators=(",", ":"),
            )
            # Allocate first: the pod's contribution then replaces the Reservation's within one pass.
            self.store.put(rts, reservations.allocated(reservation, pod), "MODIFIED", old=reservation)
        # Recorded as the API server records the scheduler's writes: the fields are the scheduler's.
        managed_fields.record(self.pods, pod, new, manager=scheduler_binary(pod))
        self.store.put(self.pods, new, "MODIFIED", old=pod)
        meta = pod["metadata"]
        self._record(
            pod,
            "Normal",
            "Scheduled",
            message=f"Successfully assigned {meta['namespace']}/{meta['name']} to {node}",
        )

    def _expire_reservations(self) -> None:
        rts = self.reservations
        if rts is None:
            return
        for reservation in list(self.store.objects(rts)):
            new = reservations.expired(reservation)
            if new is not None:
                self.store.put(rts, new, "MODIFIED", old=reservation)

    # ----------------------------------------------------------------------------------------------------
    # Reporting

    def _unschedulable_pod(self, pod: Obj, message: str) -> None:
        condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
        current = reservations.condition_of(pod.get("status") or {}, "PodScheduled")
        if current and {k: current.get(k) for k in condition} == condition:
            return
        new = copy.deepcopy(pod)
        reservations.set_condition(
            new.setdefault("status", {}), {**condition, "lastTransitionTime": now_iso()}
        )
        self.store.put(self.pods, new, "MODIFIED", old=pod)
        self._record(pod, "Warning", "FailedScheduling", message=message)

    def _record(self, obj: Obj, kind: str, reason: str, *, message: str) -> None:
        if self.options.record_events:
            record_event(
                self.store,
                self.events_rt,
                obj,
                kind=kind,
                reason=reason,
                message=message,
                component="default-scheduler",
            )


def verdicts(scheduler: Scheduler, pod: Obj) -> dict[str, tuple[str, ...]]:
    """What a scheduling pass would say of `pod` on each node, every node examined: the first refusing
    filter's reasons, none where it fits. Tests hold another fit library to it."""
    nodes = list(scheduler.store.objects(scheduler.nodes))
    spec = pod.get("spec") or {}
    claims = scheduler.volumes.claims_of(pod)
    if isinstance(claims, str):
        return {n["metadata"]["name"]: (claims,) for n in nodes}
    fit = fit_for(scheduler, spec, pod_requests(spec), nodes=nodes, pod=pod, claims=claims)
    return {n["metadata"]["name"]: fit(n)[0] for n in nodes}


def fit_for(
    scheduler: Scheduler, spec: Obj, requests: Usage, *, nodes: list[Obj], pod: Obj, claims: list[Claim]
) -> Callable[[Obj], tuple[tuple[str, ...], float]]:
    """Every filter for this pod, over `nodes`, as one check of a node."""
    available = scheduler.volumes.available_for(claims)
    filters = [lambda node: node_conflict(claims, node, available)] if claims else []
    topology = pod_topology.filter_for(
        pod, nodes, pods=scheduler.all_pods, placed_terms=bool(scheduler.cache.anti_affinity)
    )
    if topology is not None:
        filters.append(topology)
    return _fit(scheduler.cache.usage, spec, requests, policy=scheduler.options.score, filters=filters)


def scheduler_binary(pod: Obj) -> str:
    """Who binds the pod on a cluster beside Koordinator: koord-scheduler its pods, kube-scheduler others."""
    return "koord-scheduler" if pod["spec"].get("schedulerName") == "koord-scheduler" else "kube-scheduler"
