"""What the scheduler knows between passes, kept from the store's events as kube-scheduler's cache and queue
are: what bound pods and held Reservations use on each node, the pods and Reservations waiting to be
scheduled, and the Reservations a pod may take."""

from __future__ import annotations

from collections import defaultdict

from kubesim.apiserver.records import Event
from kubesim.controllers import pod_topology
from kubesim.controllers import reservation_rules as reservations
from kubesim.controllers.node_filters import Usage, add_usage
from kubesim.options import SimOptions
from shared.api.quantity import pod_requests

TERMINAL = frozenset({"Succeeded", "Failed"})
VOLUME_KINDS = frozenset({"persistentvolumeclaims", "persistentvolumes", "storageclasses"})


class NodeUsage:
    """What bound pods and held Reservations use on each node, kept from their events."""

    def __init__(self) -> None:
        self.used: dict[str, Usage] = defaultdict(dict)
        self._contrib: dict[tuple[str, str, str], tuple[str, Usage]] = {}

    def on(self, node: str) -> Usage:
        return self.used.get(node, {})

    def set(self, key: tuple[str, str, str], node: str | None, usage: Usage) -> None:
        old = self._contrib.pop(key, None)
        if old is not None:
            add_usage(self.used[old[0]], old[1], -1)
        if node is not None:
            self._contrib[key] = (node, usage)
            add_usage(self.used[node], usage, +1)


class SchedulerCache:
    def __init__(self, options: SimOptions) -> None:
        self.options = options
        self.usage = NodeUsage()
        self.pending_pods: set[tuple[str, str]] = set()
        self.pending_reservations: set[str] = set()
        self.available_reservations: set[str] = set()
        self.holding_reservations: set[str] = set()
        self.anti_affinity: set[tuple[str, str]] = set()  # bound pods with required anti-affinity terms

    def on_event(self, event: Event) -> bool:
        rt = event.rt
        if rt.group == "" and rt.plural == "pods":
            return self._pod_event(event)
        if rt.group == "scheduling.koordinator.sh" and rt.plural == "reservations":
            return self._reservation_event(event)
        if rt.plural in VOLUME_KINDS:  # a claim bound, a volume or class made: a pending pod may fit now
            return bool(self.pending_pods or self.pending_reservations)
        return rt.group == "" and rt.plural == "nodes"

    def _pod_event(self, event: Event) -> bool:
        pod = event.obj
        meta, spec = pod["metadata"], pod.get("spec") or {}
        key = (meta.get("namespace", ""), meta["name"])
        phase = (pod.get("status") or {}).get("phase")
        node = spec.get("nodeName")
        if event.type != "DELETED" and node and phase not in TERMINAL:
            self.usage.set(("pod", *key), node, pod_requests(spec))
        else:
            self.usage.set(("pod", *key), None, {})
        if event.type != "DELETED" and node and phase not in TERMINAL and pod_topology.has_anti_affinity(pod):
            self.anti_affinity.add(key)
        else:
            self.anti_affinity.discard(key)
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
        holding = not gone and phase in reservations.HOLDING_PHASES and bool(status.get("nodeName"))
        self.usage.set(
            ("reservation", "", name),
            status["nodeName"] if holding else None,
            reservations.held(obj) if holding else {},
        )
        _keep(self.holding_reservations, name, holding)
        available = not gone and phase == "Available" and not (obj.get("spec") or {}).get("unschedulable")
        _keep(self.available_reservations, name, available)
        pending = not gone and phase == "Pending" and not obj["metadata"].get("deletionTimestamp")
        _keep(self.pending_reservations, name, pending)
        return True


def _keep(members: set[str], name: str, member: bool) -> None:
    if member:
        members.add(name)
    else:
        members.discard(name)
