"""Defragmentation for a pending pod (shared.rebalance.defrag): which node to empty, and where each of its
pods goes, each move and the pending pod itself checked by every scheduler filter."""

from __future__ import annotations

from typing import Any

import pytest

from shared.fit.cluster import Cluster
from shared.fit.views import node_view
from shared.rebalance.candidates import candidate
from shared.rebalance.defrag import NoPlan, defragment, pending_pods
from shared.rebalance.planning import Planning

UNSCHEDULABLE = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]


def node(name: str, cpu: int = 4, **spec: Any) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": name, "zone": spec.pop("zone", "a")}
    allocatable = {"cpu": str(cpu), "memory": "16Gi", "pods": "110"}
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
        "status": {"allocatable": allocatable},
    }


def pod(
    name: str, where: str | None, cpu: float = 1, *, owner: str | None = "ReplicaSet", **spec: Any
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "default",
        "labels": {"app": name.split("-", maxsplit=1)[0]},
    }
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": "rs", "controller": True}]
    requests = {"cpu": f"{int(cpu * 1000)}m", "memory": "1Gi"}
    body = {"containers": [{"name": "c", "image": "i", "resources": {"requests": requests}}], **spec}
    if where:
        body["nodeName"] = where
        return {"metadata": meta, "spec": body, "status": {"phase": "Running"}}
    return {"metadata": meta, "spec": body, "status": {"phase": "Pending", "conditions": UNSCHEDULABLE}}


def half_full(nodes: int = 3) -> list[dict[str, Any]]:
    pods = [pod(f"{app}-{i}", f"n{i}") for i in range(1, nodes + 1) for app in ("web", "api")]
    return [*pods, pod("big", None, cpu=4)]


def planned(nodes: list[dict[str, Any]], pods: list[dict[str, Any]], **options: Any) -> Any:
    placed = [p for p in pods if p["spec"].get("nodeName")]
    cluster = Cluster.of([node_view(n) for n in nodes], [candidate(p).view for p in placed])
    planning = Planning.of(cluster, [candidate(p) for p in placed], **options)
    waiting = pending_pods(pods)
    if not waiting:
        raise NoPlan("no pod is pending")
    before = _usage(cluster)
    chosen = defragment(planning, waiting[0])
    assert _usage(cluster) == before  # the planning is left as it was
    return chosen


def _usage(cluster: Cluster) -> dict[str, dict[str, int]]:
    return {n: {k: v for k, v in u.items() if v} for n, u in cluster.used.items() if any(u.values())}


def test_seed_002_picture_empties_one_node_onto_the_others() -> None:
    chosen = planned([node("n1"), node("n2"), node("n3")], half_full())
    assert chosen.pending.key == "default/big" and chosen.node == "n1"
    moved = {m.pod: m.target for m in chosen.moves}
    assert set(moved) == {"default/web-1", "default/api-1"}
    assert "n1" not in moved.values()
    assert len(set(moved.values())) == 1  # gaps filled: both go to the fullest node they fit


def test_a_node_with_a_pod_that_cannot_move_is_skipped() -> None:
    pods = half_full()
    pods[0] = pod("web-1", "n1", owner=None)  # a bare pod
    assert planned([node("n1"), node("n2"), node("n3")], pods).node == "n2"


def test_reserving_room_first_leaves_pods_of_other_schedulers_where_they_are() -> None:
    pods = [{**p, "spec": {**p["spec"], "schedulerName": "koord-scheduler"}} for p in half_full()]
    pods[0] = half_full()[0]  # web-1 on n1 is placed by default-scheduler, which honours no Reservation
    nodes = [node("n1"), node("n2"), node("n3")]
    assert planned(nodes, pods, schedulers=frozenset({"koord-scheduler"})).node == "n2"
    assert planned(nodes, pods).node == "n1"  # evicting directly: any pod
    with pytest.raises(NoPlan, match="n1: default/api-1, default/web-1 cannot move"):
        planned(nodes, half_full(), schedulers=frozenset({"koord-scheduler"}))


def test_the_node_needing_fewest_moves_wins() -> None:
    pods = [pod("a-0", "n1"), pod("b-0", "n1"), pod("c-0", "n2", cpu=2), pod("big", None, cpu=4)]
    chosen = planned([node("n1"), node("n2"), node("n3", cpu=2)], pods)
    assert chosen.node == "n2" and [m.pod for m in chosen.moves] == ["default/c-0"]


@pytest.mark.parametrize(
    ("pods", "nodes", "why"),
    [
        ([pod("a-0", "n1")], [node("n1"), node("n2")], "no pod is pending"),
        ([pod("a-0", "n1"), pod("big", None, cpu=2)], [node("n1"), node("n2")], "already fits"),
        (
            [pod("a-0", "n1", cpu=3), pod("b-0", "n2", cpu=3), pod("big", None, cpu=4)],
            [node("n1"), node("n2")],
            "do not fit elsewhere",
        ),
        ([pod("a-0", "n1"), pod("big", None, cpu=8)], [node("n1"), node("n2", cpu=2)], "too small"),
    ],
)
def test_no_plan_says_why(pods: list[dict[str, Any]], nodes: list[dict[str, Any]], why: str) -> None:
    with pytest.raises(NoPlan, match=why):
        planned(nodes, pods)


def test_unschedulable_nodes_are_neither_emptied_nor_targets() -> None:
    chosen = planned([node("n1", unschedulable=True), node("n2"), node("n3")], half_full())
    assert chosen.node != "n1" and all(m.target != "n1" for m in chosen.moves)


def test_every_filter_decides_not_only_room() -> None:
    """The pending pod wants zone b; only n3 is there. A moved pod's anti-affinity keeps it off the node
    where another of its app runs, so the plan sends it elsewhere."""
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    nodes = [node("n1"), node("n2"), node("n3", zone="b"), node("n4", cpu=8)]
    pods = [
        pod("web-3", "n3", affinity=anti),
        pod("api-3", "n3"),
        pod("web-1", "n1", cpu=2),
        pod("web-4", "n4", cpu=1),
        pod("big", None, cpu=4, nodeSelector={"zone": "b"}),
    ]
    chosen = planned(nodes, pods)
    assert chosen.node == "n3"
    moved = {m.pod: m.target for m in chosen.moves}
    # web-3 fits n1 and n4 by room, but web pods run there: it goes to n2.
    assert moved["default/web-3"] == "n2"
