"""A small defragmentation planner (pure): which pods to move, and where, so that a pending pod fits.

The defragmentation article's picture: every node half full, so the cluster has room in total but no node
has room for the large pod. The planner empties the one node that needs the fewest moves: every pod on it
must be movable (owned by a ReplicaSet or StatefulSet, not terminating, and, where jobs reserve room
first, placed by a scheduler that honours Reservations, as the arbitrator demands), the pending pod must fit
there once they leave, and each moved pod must fit on another node (largest first, into the fullest node it
fits, so moves do not fragment the rest). Each move names its target node, so the replacement's Reservation
is pinned there and the emptied node stays empty for the pending pod.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from shared.quantity import milli, pod_requests

MOVABLE_OWNERS = frozenset({"ReplicaSet", "StatefulSet"})
RESOURCES = ("cpu", "memory", "pods")


@dataclass(frozen=True)
class NodeRoom:
    name: str
    allocatable: Mapping[str, int]  # milli-units, as shared.quantity
    schedulable: bool = True


@dataclass(frozen=True)
class PodLoad:
    namespace: str
    name: str
    node: str | None
    requests: Mapping[str, int]
    owner_kind: str | None = None
    phase: str = "Running"
    terminating: bool = False
    unschedulable: bool = False
    scheduler_name: str = "default-scheduler"

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def movable(self) -> bool:
        return self.owner_kind in MOVABLE_OWNERS and not self.terminating


@dataclass(frozen=True)
class Move:
    pod: PodLoad
    target_node: str


@dataclass(frozen=True)
class Plan:
    pending: PodLoad
    node: str  # the node to empty
    moves: tuple[Move, ...]


class NoPlan(Exception):
    """Nothing to do, or no node can be emptied for the pending pod; the message says which and why."""


def pod_load(obj: Mapping[str, object]) -> PodLoad:
    """A pod object (as the API returns it) reduced to what the planner needs."""
    meta: Mapping[str, object] = obj.get("metadata") or {}  # type: ignore[assignment]
    spec: dict[str, object] = obj.get("spec") or {}  # type: ignore[assignment]
    status: Mapping[str, object] = obj.get("status") or {}  # type: ignore[assignment]
    owners: list[Mapping[str, object]] = meta.get("ownerReferences") or []  # type: ignore[assignment]
    controller = next((o for o in owners if o.get("controller")), None)
    conditions: list[Mapping[str, object]] = status.get("conditions") or []  # type: ignore[assignment]
    unschedulable = any(
        c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable"
        for c in conditions
    )
    return PodLoad(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        node=str(spec["nodeName"]) if spec.get("nodeName") else None,
        requests=pod_requests(spec),
        owner_kind=str(controller.get("kind")) if controller else None,
        phase=str(status.get("phase") or "Pending"),
        terminating=bool(meta.get("deletionTimestamp")),
        unschedulable=unschedulable,
        scheduler_name=str(spec.get("schedulerName") or "default-scheduler"),
    )


def node_room(obj: Mapping[str, object]) -> NodeRoom:
    meta: Mapping[str, object] = obj.get("metadata") or {}  # type: ignore[assignment]
    spec: Mapping[str, object] = obj.get("spec") or {}  # type: ignore[assignment]
    status: Mapping[str, object] = obj.get("status") or {}  # type: ignore[assignment]
    allocatable: Mapping[str, str] = status.get("allocatable") or status.get("capacity") or {}  # type: ignore[assignment]
    conditions: list[Mapping[str, object]] = status.get("conditions") or []  # type: ignore[assignment]
    ready = all(c.get("status") == "True" for c in conditions if c.get("type") == "Ready")
    return NodeRoom(
        name=str(meta.get("name") or ""),
        allocatable={k: milli(v) for k, v in allocatable.items()},
        schedulable=ready and not spec.get("unschedulable"),
    )


def _fits(need: Mapping[str, int], free: Mapping[str, int]) -> bool:
    return all(need.get(r, 0) <= free.get(r, 0) for r in RESOURCES if need.get(r, 0))


def _minus(free: dict[str, int], used: Mapping[str, int]) -> None:
    for resource, amount in used.items():
        free[resource] = free.get(resource, 0) - amount


def free_room(nodes: Sequence[NodeRoom], pods: Sequence[PodLoad]) -> dict[str, dict[str, int]]:
    """Each node's allocatable minus the requests of the pods bound to it (terminating ones still count)."""
    free = {n.name: dict(n.allocatable) for n in nodes}
    for pod in pods:
        if pod.node in free and pod.phase not in ("Succeeded", "Failed"):
            _minus(free[pod.node], pod.requests)
    return free


def pending_pods(pods: Sequence[PodLoad]) -> list[PodLoad]:
    """Pods the scheduler could not place, largest CPU request first."""
    waiting = [p for p in pods if p.node is None and p.phase == "Pending" and p.unschedulable]
    return sorted(waiting, key=lambda p: (-p.requests.get("cpu", 0), p.key))


def plan(
    nodes: Sequence[NodeRoom],
    pods: Sequence[PodLoad],
    pending: PodLoad | None = None,
    *,
    schedulers: Collection[str] | None = None,
) -> Plan:
    """The cheapest plan to make room for `pending` (default: the largest unschedulable pod). With
    `schedulers` (the jobs reserve room first), only pods those schedulers place can move."""
    if pending is None:
        waiting = pending_pods(pods)
        if not waiting:
            raise NoPlan("no pod is pending for lack of room: nothing to defragment")
        pending = waiting[0]
    free = free_room(nodes, pods)
    usable = [n for n in nodes if n.schedulable]
    if any(_fits(pending.requests, free[n.name]) for n in usable):
        raise NoPlan(f"{pending.key} already fits on a node: the scheduler will place it")
    best: Plan | None = None
    why: list[str] = []
    for node in sorted(usable, key=lambda n: n.name):
        on_node = [p for p in pods if p.node == node.name and p.phase not in ("Succeeded", "Failed")]
        stuck = [
            p.key for p in on_node if not p.movable or (schedulers and p.scheduler_name not in schedulers)
        ]
        if stuck:
            why.append(f"{node.name}: {', '.join(stuck[:3])} cannot move")
            continue
        room = dict(node.allocatable)
        if not _fits(pending.requests, room):
            why.append(f"{node.name}: too small for {pending.key} even when empty")
            continue
        moves = _place(on_node, {n.name: dict(free[n.name]) for n in usable if n.name != node.name})
        if moves is None:
            why.append(f"{node.name}: its pods do not fit elsewhere")
            continue
        if best is None or len(moves) < len(best.moves):
            best = Plan(pending, node.name, tuple(moves))
    if best is None:
        raise NoPlan(f"no node can be emptied for {pending.key}: " + "; ".join(why))
    return best


def _place(movers: Sequence[PodLoad], free: dict[str, dict[str, int]]) -> list[Move] | None:
    moves: list[Move] = []
    for pod in sorted(movers, key=lambda p: (-p.requests.get("cpu", 0), -p.requests.get("memory", 0), p.key)):
        fitting = [name for name, room in free.items() if _fits(pod.requests, room)]
        if not fitting:
            return None
        # The fullest node it fits (least CPU left), so the moves fill gaps instead of opening new ones.
        target = min(fitting, key=lambda name: (free[name].get("cpu", 0), name))
        _minus(free[target], pod.requests)
        moves.append(Move(pod, target))
    return moves
