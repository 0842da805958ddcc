"""Rebalancing plans (shared.rebalance), on clusters built in memory: each policy's measure improves, every
move is one the scheduler would make on the cluster the earlier moves leave, and caps, protections, recent
moves and nodes being emptied are respected."""

from __future__ import annotations

from typing import Any

from shared.fit.check import Fit
from shared.fit.cluster import Cluster
from shared.fit.views import node_view
from shared.rebalance import policies
from shared.rebalance.candidates import candidate
from shared.rebalance.planning import Caps, Planning, RecentMove, fill
from shared.rebalance.snapshot import recent_moves

ZONE = "topology.kubernetes.io/zone"
CUT = {"cpu": 20.0, "memory": 20.0, "pods": 20.0}
TARGET = {"cpu": 50.0, "memory": 50.0, "pods": 50.0}


def node(name: str, zone: str = "a", *, cpu: str = "10", **spec: Any) -> dict[str, Any]:
    allocatable = {"cpu": cpu, "memory": "100Gi", "pods": "20"}
    labels = {ZONE: zone, "kubernetes.io/hostname": name}
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
        "status": {"allocatable": allocatable},
    }


def pod(name: str, where: str, cpu: str = "1", *, owner: str = "ReplicaSet", **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": extra.pop("namespace", "default"),
        "labels": extra.pop("labels", {"app": name.rsplit("-", 1)[0]}),
        "ownerReferences": [{"kind": owner, "name": name.rsplit("-", 1)[0], "controller": True}],
        "annotations": extra.pop("annotations", {}),
        "creationTimestamp": extra.pop("created", "2026-01-01T00:00:00Z"),
    }
    containers = [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]
    return {"metadata": meta, "spec": {"nodeName": where, "containers": containers, **extra}}


def planning_of(nodes: list[dict[str, Any]], pods: list[dict[str, Any]], **options: Any) -> Planning:
    moved_since = options.pop("moved_since", "")
    cluster = Cluster.of([node_view(n) for n in nodes], [candidate(p).view for p in pods])
    return Planning.of(cluster, [candidate(p, moved_since=moved_since) for p in pods], **options)


def replay(nodes: list[dict[str, Any]], pods: list[dict[str, Any]], planning: Planning) -> None:
    """Each move, in order, fits its target on the cluster the moves before it leave (pod still in place)."""
    cluster = Cluster.of([node_view(n) for n in nodes], [candidate(p).view for p in pods])
    views = {candidate(p).key: candidate(p).view for p in pods}
    for move in planning.moves:
        view = views[move.pod]
        assert view.node == move.source
        assert Fit(cluster, view).fits(cluster.nodes[move.target]), move
        cluster.remove(view)
        views[move.pod] = cluster.place(view, move.target)


def test_low_node_utilization_brings_every_node_under_its_targets() -> None:
    nodes = [node("hot-0"), node("hot-1"), node("cold-0"), node("cold-1"), node("mid")]
    pods = [pod(f"web-{i}", f"hot-{i % 2}") for i in range(14)] + [pod("db-0", "mid", "3")]
    planning = planning_of(nodes, pods)
    measure = policies.low_node_utilization(planning, thresholds=CUT, target_thresholds=TARGET)
    assert (measure.before, measure.after) == (2, 0)
    assert all(fill(planning.cluster, n)["cpu"] <= 50 for n in planning.cluster.nodes)
    assert {m.target for m in planning.moves} <= {"cold-0", "cold-1"}  # never onto the mid node
    replay(nodes, pods, planning)


def test_low_node_utilization_does_nothing_without_enough_underutilized_nodes() -> None:
    nodes = [node("hot"), node("cold")]
    pods = [pod(f"web-{i}", "hot") for i in range(8)]
    planning = planning_of(nodes, pods)
    measure = policies.low_node_utilization(
        planning, thresholds=CUT, target_thresholds=TARGET, number_of_nodes=1
    )
    assert planning.moves == [] and measure.before == measure.after == 1


def test_caps_limit_moves_per_node_namespace_and_run() -> None:
    nodes = [node("hot"), node("cold-0"), node("cold-1")]
    pods = [pod(f"web-{i}", "hot", namespace="shop" if i % 2 else "default") for i in range(9)]
    for caps, most in ((Caps(per_node=2), 2), (Caps(per_namespace=1), 2), (Caps(total=3), 3)):
        planning = planning_of(nodes, pods, caps=caps)
        policies.low_node_utilization(planning, thresholds=CUT, target_thresholds=TARGET)
        assert len(planning.moves) == most, caps
        assert any("maxNoOfPodsToEvict" in why for why in planning.skipped.values())


def test_protected_and_recently_moved_pods_stay() -> None:
    nodes = [node("hot"), node("cold")]
    pods = [
        pod("keep-0", "hot", "2", annotations={"karpenter.sh/do-not-disrupt": "true"}),
        pod("cost-0", "hot", "2", annotations={"scheduling.koordinator.sh/eviction-cost": str(2**31 - 1)}),
        pod("bare-0", "hot", "2", owner="Node"),
        pod(
            "new-0",
            "hot",
            "2",
            annotations={"scheduling.koordinator.sh/reservation-allocated": "{}"},
            created="2026-05-01T00:10:00Z",
        ),
    ]
    planning = planning_of(nodes, pods, moved_since="2026-05-01T00:00:00Z")
    policies.low_node_utilization(planning, thresholds=CUT, target_thresholds=TARGET)
    assert planning.moves == []
    assert planning.skipped["default/keep-0"] == "karpenter.sh/do-not-disrupt=true"
    assert planning.skipped["default/bare-0"] == "owned by Node"
    assert "within the window" in planning.skipped["default/new-0"]


def test_high_node_utilization_empties_whole_nodes_onto_the_fullest_and_never_onto_one_being_emptied() -> (
    None
):
    nodes = [node("full"), node("half"), node("low-0"), node("low-1"), node("stuck")]
    pods = (
        [pod(f"a-{i}", "full") for i in range(7)]
        + [pod(f"b-{i}", "half") for i in range(5)]
        + [pod("c-0", "low-0"), pod("c-1", "low-1")]
        + [pod("d-0", "stuck", "500m"), pod("lone-0", "stuck", "500m", owner="Node")]
        + [pod("ds-0", "low-0", "100m", owner="DaemonSet")]
    )
    planning = planning_of(nodes, pods)
    measure = policies.high_node_utilization(planning, thresholds=CUT)
    assert planning.emptying == {"low-0", "low-1"}
    assert {m.pod: m.target for m in planning.moves} == {"default/c-0": "full", "default/c-1": "full"}
    assert "stuck cannot be emptied whole" in planning.skipped["default/d-0"]
    assert measure.after - measure.before == 2
    replay(nodes, pods, planning)


def test_a_chain_uses_room_an_earlier_move_frees() -> None:
    """Consolidation: the small node's pod only fits the big node after nothing else; the plan's moves each
    see the room the earlier ones leave, and `take_back` restores a node that cannot be emptied whole."""
    nodes = [node("big", cpu="4"), node("low-0", cpu="10"), node("low-1", cpu="10")]
    pods = [pod("x-0", "big", "2"), pod("y-0", "low-0", "1"), pod("z-0", "low-1", "1")]
    planning = planning_of(nodes, pods)
    policies.high_node_utilization(planning, thresholds={"cpu": 15.0})
    # Both low nodes are under 15 %: each is emptied onto the big node, which the first move leaves at 3/4.
    assert [m.target for m in planning.moves] == ["big", "big"]
    replay(nodes, pods, planning)
    assert fill(planning.cluster, "big")["cpu"] == 100.0


def test_spread_repair_moves_pods_from_the_largest_zone_to_the_smallest() -> None:
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": ZONE,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}},
        }
    ]
    nodes = [node("a-0", "a"), node("b-0", "b"), node("c-0", "c")]
    pods = [pod(f"web-{i}", "a-0", topologySpreadConstraints=spread) for i in range(5)] + [
        pod("web-5", "b-0", topologySpreadConstraints=spread)
    ]
    planning = planning_of(nodes, pods)
    measure = policies.spread_repair(planning)
    assert measure.before == 4 and measure.after == 0
    zones = [planning.cluster.nodes[v.node or ""].labels[ZONE] for v in planning.views.values()]
    assert sorted(zones.count(z) for z in "abc") == [2, 2, 2]
    replay(nodes, pods, planning)


def test_no_plan_undoes_a_recent_move() -> None:
    """A web pod moved cold-1 -> hot-0 a moment ago: web pods on hot-0 stay, and no web pod goes back onto
    cold-1; other workloads are not held."""
    nodes = [node("hot-0"), node("cold-0"), node("cold-1")]
    pods = [pod(f"web-{i}", "hot-0") for i in range(7)] + [pod("api-0", "hot-0")]
    recent = [RecentMove(owner="ReplicaSet/web", source="cold-1", target="hot-0")]
    planning = planning_of(nodes, pods, recent=recent)
    policies.low_node_utilization(planning, thresholds=CUT, target_thresholds=TARGET)
    assert [m.pod for m in planning.moves] == ["default/api-0"]
    assert "moved onto hot-0 recently" in planning.skipped["default/web-0"]
    # Moved away from hot-0 instead: only cold-1, the node it left, is closed to the web pods.
    planning = planning_of(nodes, pods, recent=[RecentMove("ReplicaSet/web", "cold-1", "elsewhere")])
    policies.low_node_utilization(planning, thresholds=CUT, target_thresholds=TARGET)
    assert {m.target for m in planning.moves if m.pod.startswith("default/web-")} == {"cold-0"}


def test_recent_moves_are_read_from_the_jobs_that_made_them() -> None:
    def job(phase: str, began: str, **annotations: str) -> dict[str, Any]:
        meta = {"creationTimestamp": began, "annotations": annotations}
        return {"metadata": meta, "status": {"phase": phase, "nodeName": "cold-1"}}

    where = {"podherd.io/source-node": "hot-0", "podherd.io/workload": "ReplicaSet/web"}
    jobs = [
        job("Succeeded", "2026-05-01T00:10:00Z", **where),
        job("Succeeded", "2026-04-30T23:00:00Z", **where),  # too long ago
        job("Failed", "2026-05-01T00:10:00Z", **where),  # nothing moved
        job("Succeeded", "2026-05-01T00:10:00Z"),  # a job that recorded no source (made directly)
    ]
    assert recent_moves(jobs, since="2026-05-01T00:00:00Z") == [
        RecentMove("ReplicaSet/web", "hot-0", "cold-1")
    ]
