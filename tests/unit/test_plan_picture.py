"""What the plan's picture counts (pure): each node's pods and, for spread repair, the moved workloads' pods
per zone, before the plan and after it; and the picture drawn from them at 50 nodes."""

from __future__ import annotations

from pathlib import Path

import pytest

from podherd.plan_output import ZONE, picture, pod_counts, zone_counts
from podherd.rebalance import Outcome
from shared.fit.cluster import Cluster
from shared.fit.views import NodeView, PodView
from shared.rebalance.candidates import Candidate
from shared.rebalance.planning import Move, Planning
from shared.rebalance.policies import Measure

SPREAD = "RemovePodsViolatingTopologySpreadConstraint"


def outcome(nodes: int = 4) -> Outcome:
    names = [f"node-{i}" for i in range(1, nodes + 1)]
    views = {n: NodeView(n, {ZONE: "ab"[i % 2]}, {"cpu": 4000, "pods": 110}) for i, n in enumerate(names)}
    pods = [PodView("shop", f"web-{i}", node="node-1") for i in range(3)] + [
        PodView("shop", "db-0", node="node-2")
    ]
    candidates = {
        p.key: Candidate(p, "Deployment/web" if p.name.startswith("web") else "StatefulSet/db") for p in pods
    }
    moves = [Move("shop/web-0", "Deployment/web", "node-1", "node-2", "spread")]
    planning = Planning(Cluster(nodes=views), candidates, moves=moves)
    planning.views["shop/web-0"] = PodView("shop", "web-0", node="node-2")
    fill = {n: {"cpu": 10.0, "memory": 10.0, "pods": 1.0} for n in names}
    return Outcome(SPREAD, planning, Measure("pods over maxSkew", 1, 0), fill, fill)


def test_each_nodes_pods_and_each_zones_moved_workload_before_and_after() -> None:
    found = outcome()
    assert pod_counts(found) == {"node-1": (3, 2), "node-2": (1, 2), "node-3": (0, 0), "node-4": (0, 0)}
    # only web moved: its three pods, all in zone a before, one of them in zone b after
    assert zone_counts(found) == {"a": (3, 2), "b": (0, 1)}


@pytest.mark.parametrize("nodes", [4, 50])
def test_the_picture_is_drawn_at_any_size(nodes: int, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    target = tmp_path / "deep" / "plan.png"
    picture(outcome(nodes), str(target))
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
