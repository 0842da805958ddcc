"""The defragmentation planner: which node to empty, and where each of its pods goes."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from podherd.planner import NodeRoom, NoPlan, PodLoad, node_room, plan, pod_load

GI = 1024**3 * 1000


def node(name: str, cpu: int = 4, schedulable: bool = True) -> NodeRoom:
    return NodeRoom(name, {"cpu": cpu * 1000, "memory": 16 * GI, "pods": 110_000}, schedulable)


def pod(name: str, node_name: str | None, cpu: float = 1, owner: str | None = "ReplicaSet") -> PodLoad:
    return PodLoad(
        "default",
        name,
        node_name,
        {"cpu": int(cpu * 1000), "memory": GI, "pods": 1000},
        owner_kind=owner,
        phase="Running" if node_name else "Pending",
        unschedulable=node_name is None,
    )


def half_full(nodes: int = 3) -> list[PodLoad]:
    pods = [pod(f"{app}-{i}", f"n{i}") for i in range(1, nodes + 1) for app in ("web", "api")]
    return [*pods, pod("big", None, cpu=4)]


def test_seed_002_picture_empties_one_node_onto_the_others() -> None:
    nodes = [node("n1"), node("n2"), node("n3")]
    chosen = plan(nodes, half_full())
    assert chosen.pending.name == "big"
    assert chosen.node == "n1"
    moved = {m.pod.name: m.target_node for m in chosen.moves}
    assert set(moved) == {"web-1", "api-1"}
    assert "n1" not in moved.values()
    # Fill gaps rather than spread: both go to the fullest node they fit.
    assert len(set(moved.values())) == 1


def test_a_node_with_a_pod_that_cannot_move_is_skipped() -> None:
    pods = half_full()
    pods[0] = pod("web-1", "n1", owner=None)  # a bare pod
    chosen = plan([node("n1"), node("n2"), node("n3")], pods)
    assert chosen.node == "n2"


def test_reserving_room_first_leaves_pods_of_other_schedulers_where_they_are() -> None:
    pods = half_full()
    koord = [dataclasses.replace(p, scheduler_name="koord-scheduler") for p in pods]
    koord[0] = pods[0]  # web-1 on n1 is placed by default-scheduler, which honours no Reservation
    assert plan([node("n1"), node("n2"), node("n3")], koord, schedulers=["koord-scheduler"]).node == "n2"
    assert plan([node("n1"), node("n2"), node("n3")], koord).node == "n1"  # evicting directly: any pod
    with pytest.raises(NoPlan, match="n1: default/web-1, default/api-1 cannot move"):
        plan([node("n1"), node("n2"), node("n3")], pods, schedulers=["koord-scheduler"])


def test_the_node_needing_fewest_moves_wins() -> None:
    pods = [pod("a", "n1"), pod("b", "n1"), pod("c", "n2", cpu=2), pod("big", None, cpu=4)]
    chosen = plan([node("n1"), node("n2"), node("n3", cpu=2)], pods)
    assert chosen.node == "n2"
    assert [m.pod.name for m in chosen.moves] == ["c"]  # one move instead of two


@pytest.mark.parametrize(
    ("pods", "nodes", "why"),
    [
        ([pod("a", "n1")], [node("n1"), node("n2")], "no pod is pending"),
        ([pod("a", "n1"), pod("big", None, cpu=2)], [node("n1"), node("n2")], "already fits"),
        (
            [pod("a", "n1", cpu=3), pod("b", "n2", cpu=3), pod("big", None, cpu=4)],
            [node("n1"), node("n2")],
            "do not fit elsewhere",
        ),
        ([pod("a", "n1"), pod("big", None, cpu=8)], [node("n1"), node("n2", cpu=2)], "too small"),
    ],
)
def test_no_plan_says_why(pods: list[PodLoad], nodes: list[NodeRoom], why: str) -> None:
    with pytest.raises(NoPlan, match=why):
        plan(nodes, pods)


def test_unschedulable_nodes_are_neither_emptied_nor_targets() -> None:
    pods = half_full()
    chosen = plan([node("n1", schedulable=False), node("n2"), node("n3")], pods)
    assert chosen.node != "n1"
    assert all(m.target_node != "n1" for m in chosen.moves)


def test_objects_from_the_api_are_read_as_the_scheduler_would() -> None:
    obj: dict[str, Any] = {
        "metadata": {
            "namespace": "ns",
            "name": "p",
            "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "controller": True}],
        },
        "spec": {
            "nodeName": "n1",
            "containers": [
                {"resources": {"requests": {"cpu": "250m"}}},
                {"resources": {"requests": {"cpu": "1"}}},
            ],
        },
        "status": {"phase": "Running"},
    }
    loaded = pod_load(obj)
    assert (loaded.key, loaded.node, loaded.requests["cpu"], loaded.movable) == ("ns/p", "n1", 1250, True)
    terminating = pod_load(
        {**obj, "metadata": {**obj["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    )
    assert not terminating.movable
    n = node_room(
        {
            "metadata": {"name": "n1"},
            "spec": {"unschedulable": True},
            "status": {
                "allocatable": {"cpu": "4", "memory": "1Gi"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
    )
    assert n.allocatable["cpu"] == 4000 and not n.schedulable
