"""A cluster as the scheduler's cache holds it: nodes, the pods bound to each and what they request, the room
Reservations hold, and the volumes bound claims use. It can be changed as a plan would change it (a pod
placed, a pod gone), so a plan checks each move against the cluster the earlier moves leave.

Pods that have ended hold nothing and are not kept. Terminating pods still hold their room (the scheduler
counts them until they are gone), but topology spread does not count them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from shared.fit.views import ENDED, NodeView, PodView, VolumeView

Usage = dict[str, int]


def add(target: Usage, delta: Mapping[str, int], sign: int = 1) -> None:
    for name, value in delta.items():
        target[name] = target.get(name, 0) + sign * value


@dataclass
class Held:
    """Room a Reservation holds on a node: what it has left, and the pods (as "namespace/name") it is for."""

    name: str
    node: str
    room: Mapping[str, int]
    owners: frozenset[str] = frozenset()


@dataclass
class Cluster:
    nodes: dict[str, NodeView] = field(default_factory=dict)
    pods_on: dict[str, dict[str, PodView]] = field(default_factory=lambda: defaultdict(dict))
    used: dict[str, Usage] = field(default_factory=lambda: defaultdict(dict))
    volumes: dict[str, VolumeView] = field(default_factory=dict)  # "namespace/claim" -> its bound volume
    namespace_labels: dict[str, Mapping[str, str]] = field(default_factory=dict)
    held: dict[str, list[Held]] = field(default_factory=lambda: defaultdict(list))
    # Bound pods with required anti-affinity terms, every placement must respect them: by the namespace
    # their terms reach ("*": any, by a namespace selector or for all namespaces).
    shunning: dict[str, dict[str, PodView]] = field(default_factory=lambda: defaultdict(dict))
    by_namespace: dict[str, dict[str, PodView]] = field(default_factory=lambda: defaultdict(dict))

    @classmethod
    def of(
        cls,
        nodes: Iterable[NodeView],
        pods: Iterable[PodView],
        *,
        held: Iterable[Held] = (),
        volumes: Mapping[str, VolumeView] | None = None,
        namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
    ) -> Cluster:
        cluster = cls(volumes=dict(volumes or {}), namespace_labels=dict(namespace_labels or {}))
        for node in nodes:
            cluster.nodes[node.name] = node
        for pod in pods:
            if pod.node is not None and pod.phase not in ENDED:
                cluster.place(pod, pod.node)
        for room in held:
            cluster.hold(room)
        return cluster

    def place(self, pod: PodView, node: str) -> PodView:
        """The pod bound to `node` (the view returned is the placed one)."""
        if pod.node is not None and pod.key in self.pods_on.get(pod.node, {}):
            self.remove(pod)
        placed = pod if pod.node == node else replace(pod, node=node)
        self.pods_on[node][placed.key] = placed
        add(self.used[node], placed.requests)
        self.by_namespace[placed.namespace][placed.key] = placed
        for scope in _reach(placed):
            self.shunning[scope][placed.key] = placed
        return placed

    def remove(self, pod: PodView) -> None:
        if pod.node is None:
            return
        gone = self.pods_on.get(pod.node, {}).pop(pod.key, None)
        if gone is None:
            return
        add(self.used[pod.node], gone.requests, -1)
        self.by_namespace[pod.namespace].pop(pod.key, None)
        for scope in _reach(gone):
            self.shunning[scope].pop(pod.key, None)

    def hold(self, room: Held) -> None:
        self.held[room.node].append(room)
        add(self.used[room.node], room.room)

    def pods(self) -> Iterable[PodView]:
        for on_node in self.pods_on.values():
            yield from on_node.values()

    def count_on(self, node: str) -> int:
        return len(self.pods_on.get(node, {}))

    def bonus_for(self, pod: PodView, node: str) -> Usage:
        """The room Reservations on `node` hold for this pod (it may take the largest of them)."""
        best: Usage = {}
        for room in self.held.get(node, ()):
            if pod.key in room.owners and sum(room.room.values()) > sum(best.values()):
                best = dict(room.room)
        return best


def _reach(pod: PodView) -> set[str]:
    """The namespaces the pod's anti-affinity terms select pods in ("*": any)."""
    reach: set[str] = set()
    for term in pod.anti_affinity:
        if term.namespaces is None or term.namespace_selector is not None:
            reach.add("*")
        else:
            reach.update(term.namespaces)
    return reach
