"""`podherd plan --policy NAME` on a skewed kubesim cluster: the plan as YAML, each move checked as the
scheduler would check it (moves only onto nodes that had room, none onto a node being emptied), and the
picture of the nodes' fill."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesim.sim import SimHandle
from podherd.cli import main

pytestmark = [pytest.mark.integration]
CAPACITY = {"cpu": "8", "memory": "32Gi", "pods": "110"}


@pytest.fixture
def skewed(kubesim_factory: Callable[..., SimHandle]) -> SimHandle:
    scenario = {
        "name": "skewed",
        "nodes": [{"name": "node-{i}", "count": 6, "capacity": CAPACITY}],
        "workloads": [
            {
                "kind": "Deployment",
                "name": "web",
                "replicas": 10,
                "requests": {"cpu": "1", "memory": "1Gi"},
                "schedulerName": "koord-scheduler",
                "placement": ["node-1", "node-2"],
            },
            {
                "kind": "Deployment",
                "name": "api",
                "replicas": 2,
                "requests": {"cpu": "500m", "memory": "1Gi"},
                "schedulerName": "koord-scheduler",
                "placement": ["node-4", "node-5"],
            },
            {
                "kind": "Deployment",
                "name": "pinned",
                "replicas": 1,
                "requests": {"cpu": "500m"},
                "placement": ["node-6"],
                "annotations": {"karpenter.sh/do-not-disrupt": "true"},
            },
        ],
    }
    return kubesim_factory(scenario)


def plan(handle: SimHandle, capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["plan", "--kubeconfig", str(handle.kubeconfig), "-o", "yaml", *argv]) == 0
    document: dict[str, Any] = yaml.safe_load(capsys.readouterr().out)
    return document


def test_low_node_utilization_moves_pods_from_hot_nodes_onto_cold_ones(
    skewed: SimHandle, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    picture = tmp_path / "fill.png"
    found = plan(skewed, capsys, "--policy", "LowNodeUtilization", "--picture", str(picture))
    assert found["measure"] == {"name": "nodes over targetThresholds", "before": 2.0, "after": 0.0}
    assert {m["from"] for m in found["moves"]} == {"node-1", "node-2"}
    # Onto the underutilized nodes, the emptiest (node-3, with no pod) first.
    assert found["moves"][0]["to"] == "node-3"
    assert {m["to"] for m in found["moves"]} <= {"node-3", "node-4", "node-5", "node-6"}
    assert all(node["after"]["cpu"] <= 50 for node in found["nodes"].values())
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # This cluster has no Reservation type (no Koordinator): said, not silently left out.
    assert [lacking.rsplit(": ", 1)[1] for lacking in found["unread"]] == [
        "room Reservations hold is not counted",
        "recent moves are not known, so a plan may undo one",
    ]


def test_high_node_utilization_empties_whole_nodes_only(
    skewed: SimHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    found = plan(
        skewed, capsys, "--policy", "HighNodeUtilization", "--thresholds", "cpu=10,memory=10,pods=10"
    )
    # node-4 and node-5 each hold one api pod (6 %); node-6's pod may not be disrupted, so it stays whole.
    assert found["emptied"] == ["node-4", "node-5"]
    assert {m["from"] for m in found["moves"]} == {"node-4", "node-5"}
    assert {m["to"] for m in found["moves"]} <= {"node-1", "node-2"}  # the fullest first
    [pinned] = [why for pod, why in found["stays"].items() if pod.startswith("default/pinned-")]
    assert pinned == "karpenter.sh/do-not-disrupt=true"


def test_the_table_says_which_pods_stay_and_why_and_no_option_is_ignored(
    skewed: SimHandle, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    argv = ["plan", "--kubeconfig", str(skewed.kubeconfig), "--policy", "HighNodeUtilization"]
    argv += ["--thresholds", "cpu=10,memory=10,pods=10"]
    stays = plan(skewed, capsys, *argv[3:])["stays"]
    assert main(argv) == 0
    table = capsys.readouterr().out
    why = stays[next(p for p in stays if p.startswith("default/pinned-"))]
    counted = sum(1 for w in stays.values() if w == why)
    assert any(line.split(None, 1) == [str(counted), why] for line in table.splitlines()), table
    assert main([*argv, "-o", "wide"]) == 0
    wide = capsys.readouterr().out.splitlines()
    for pod, reason in stays.items():
        assert any(line.split(None, 1) == [pod, reason] for line in wide), (pod, wide)
    # An option the chosen plan does not read is refused, never silently ignored.
    plain = ["plan", "--kubeconfig", str(skewed.kubeconfig)]
    for extra, said in (
        (["--picture", str(tmp_path / "x.png")], "--picture is read by LowNodeUtilization, "),
        (["--number-of-nodes", "3"], "--number-of-nodes is read by LowNodeUtilization, not by defrag"),
        (["--policy", "HighNodeUtilization", "--target-thresholds", "cpu=50"], "not by HighNodeUtilization"),
        (["--policy", "LowNodeUtilization", "--pod", "default/x"], "--pod is read by defrag, not by Low"),
    ):
        assert main([*plain, *extra]) == 1, extra
        assert said in capsys.readouterr().err, extra
    assert not (tmp_path / "x.png").exists()
