"""Defragmentation for a pending pod: which node to empty, and where its pods go, so that the pod fits.

The defragmentation article's picture: every node half full, so the cluster has room in total but no node
has room for the large pod. The node that needs the fewest moves is emptied: every pod on it must be
movable (a ReplicaSet's or StatefulSet's, nothing protecting it, and, where jobs reserve room first, placed
by a scheduler that honours Reservations), each must fit another node as the scheduler would place its
replacement (largest first, into the fullest node it fits, so moves fill gaps instead of opening new ones),
and then the pending pod must fit the emptied node, by every filter, not only by room. Each move names its
target node, so the replacement's Reservation is pinned there and the emptied node stays empty for the
pending pod.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from shared.fit.check import Fit
from shared.fit.cluster import Cluster
from shared.fit.views import PodView, pod_view
from shared.rebalance.planning import Move, Planning


@dataclass(frozen=True)
class Defrag:
    pending: PodView
    node: str  # the node to empty
    moves: tuple[Move, ...]


class NoPlan(Exception):
    """Nothing to do, or no node can be emptied for the pending pod; the message says which and why."""


def pending_pods(pods: Iterable[Mapping[str, Any]]) -> list[PodView]:
    """Pods the scheduler could not place, largest CPU request first."""
    waiting = [
        pod_view(p)
        for p in pods
        if not (p.get("spec") or {}).get("nodeName")
        and (p.get("status") or {}).get("phase", "Pending") == "Pending"
        and any(
            c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
            for c in (p.get("status") or {}).get("conditions") or ()
        )
    ]
    return sorted(waiting, key=lambda p: (-p.requests.get("cpu", 0), p.key))


def defragment(planning: Planning, pending: PodView) -> Defrag:
    """The cheapest way to make room for `pending`; the planning is left as it was."""
    cluster = planning.cluster
    usable = sorted(n for n, node in cluster.nodes.items() if not node.unschedulable)
    fit = Fit(cluster, pending)
    if any(fit.fits(cluster.nodes[n]) for n in usable):
        raise NoPlan(f"{pending.key} already fits on a node: the scheduler will place it")
    best: Defrag | None = None
    why: list[str] = []
    for node in usable:
        reason = _emptied(planning, pending, node)
        if isinstance(reason, str):
            why.append(f"{node}: {reason}")
        elif best is None or len(reason) < len(best.moves):
            best = Defrag(pending, node, reason)
    if best is None:
        raise NoPlan(f"no node can be emptied for {pending.key}: " + "; ".join(why))
    return best


def _emptied(planning: Planning, pending: PodView, node: str) -> tuple[Move, ...] | str:
    """The moves that empty `node` for the pending pod, or why it cannot be emptied for it."""
    cluster = planning.cluster
    alone = Fit(Cluster.of([cluster.nodes[node]], ()), pending).reasons(cluster.nodes[node])
    if alone:
        return f"too small for {pending.key} even when empty ({', '.join(alone)})"
    on_node = [k for k in cluster.pods_on.get(node, {}) if k not in planning.candidates]
    stuck = on_node + [c.key for c in planning.on(node) if planning.why_not_movable(c) is not None]
    if stuck:
        return f"{', '.join(sorted(stuck)[:3])} cannot move"
    planning.emptying.add(node)
    done = 0
    try:
        for pod in sorted(planning.on(node), key=_largest_first):
            if planning.move(pod, _fullest_first(planning), why=f"make room for {pending.key}") is None:
                return "its pods do not fit elsewhere"
            done += 1
        if not Fit(cluster, pending).fits(cluster.nodes[node]):
            return f"{pending.key} would not fit it emptied"
        return tuple(planning.moves[-done:]) if done else ()
    finally:
        planning.take_back(done)
        planning.emptying.discard(node)


def _largest_first(pod: Any) -> tuple[int, int, str]:
    return (-pod.view.requests.get("cpu", 0), -pod.view.requests.get("memory", 0), pod.key)


def _fullest_first(planning: Planning) -> list[str]:
    """Nodes by the CPU they have left, least first: the moves fill gaps instead of opening new ones."""
    cluster = planning.cluster

    def left(name: str) -> tuple[int, str]:
        allocatable = cluster.nodes[name].allocatable.get("cpu", 0)
        return (allocatable - cluster.used.get(name, {}).get("cpu", 0), name)

    return sorted((n for n, node in cluster.nodes.items() if not node.unschedulable), key=left)
