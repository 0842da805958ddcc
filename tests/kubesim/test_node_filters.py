"""Whether a pod fits a node by kubesim's scheduler (kubesim.controllers.node_filters), as kube-scheduler's
filters decide and say it: room, nodeSelector, required node affinity, taints and tolerations (cordoned and
NotReady nodes tainted as the node lifecycle controller taints them)."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.controllers.node_filters import (
    AFFINITY_MISMATCH,
    allocatable,
    insufficient,
    node_ready,
    reject,
)


def node(name: str = "node-a", **extra: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"zone": "a", "generation": "5", **extra.pop("labels", {})}},
        "spec": extra.pop("spec", {}),
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}, **extra.pop("status", {})},
    }


def test_room_is_allocatable_minus_what_is_in_use() -> None:
    free = allocatable(node())
    assert free["cpu"] == 4000
    assert insufficient(node(), {"cpu": 3000}, {"cpu": 1000}) == ()
    assert insufficient(node(), {"cpu": 3500}, {"cpu": 1000}) == ("Insufficient cpu",)
    # Every shortfall, the pod count first, as NodeResourcesFit names them.
    lacking = insufficient(
        node(), {"cpu": 3500, "pods": 110_000}, {"memory": 9 * 1024**3 * 1000, "cpu": 1000, "pods": 1000}
    )
    assert lacking == ("Too many pods", "Insufficient cpu", "Insufficient memory")
    # A Reservation's own room counts for the pod that takes it.
    assert insufficient(node(), {"cpu": 3500}, {"cpu": 1000}, bonus={"cpu": 1000}) == ()


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    """A pod spec whose required node affinity has these terms (OR-ed)."""
    needed = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}
    return {"affinity": {"nodeAffinity": needed}}


ZONE_B = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}
NEWER = {"matchExpressions": [{"key": "generation", "operator": "Gt", "values": ["4"]}]}
NOT_NODE_A = {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["node-a"]}]}
NO_GPU = {"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]}


@pytest.mark.parametrize(
    ("spec", "fits"),
    [
        ({"nodeSelector": {"zone": "a"}}, True),
        ({"nodeSelector": {"zone": "b"}}, False),
        (required(ZONE_B, NEWER), True),  # terms are OR-ed
        (required(NOT_NODE_A), False),  # the node a migration excludes
        (required(NO_GPU), True),
    ],
)
def test_selector_and_required_affinity(spec: dict[str, Any], fits: bool) -> None:
    assert (reject(spec, node()) is None) == fits
    if not fits:
        assert reject(spec, node()) == AFFINITY_MISMATCH


@pytest.mark.parametrize(
    ("taint", "tolerations", "fits"),
    [
        ({"key": "dedicated", "value": "db", "effect": "NoSchedule"}, [], False),
        (
            {"key": "dedicated", "value": "db", "effect": "NoSchedule"},
            [{"key": "dedicated", "operator": "Equal", "value": "db"}],
            True,
        ),
        (
            {"key": "dedicated", "value": "db", "effect": "NoSchedule"},
            [{"key": "dedicated", "value": "web"}],
            False,
        ),
        ({"key": "dedicated", "value": "db", "effect": "NoExecute"}, [{"operator": "Exists"}], True),
        (
            {"key": "dedicated", "value": "db", "effect": "NoExecute"},
            [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
            False,
        ),
        ({"key": "soft", "effect": "PreferNoSchedule"}, [], True),  # a preference, not a filter
    ],
)
def test_taints_and_tolerations(taint: dict[str, Any], tolerations: list[dict[str, Any]], fits: bool) -> None:
    tainted = node(spec={"taints": [taint]})
    said = reject({"tolerations": tolerations}, tainted)
    assert (said is None) == fits
    if not fits:
        assert said == f"node(s) had untolerated taint {{{taint['key']}: {taint.get('value', '')}}}"


def test_cordoned_and_not_ready_nodes_are_tainted_as_the_lifecycle_controller_taints_them() -> None:
    assert reject({}, node(spec={"unschedulable": True})) == "node(s) were unschedulable"
    not_ready = node(status={"conditions": [{"type": "Ready", "status": "False"}]})
    assert not node_ready(not_ready)
    assert reject({}, not_ready) == "node(s) had untolerated taint {node.kubernetes.io/not-ready: }"
    tolerant = {"tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists"}]}
    assert reject(tolerant, not_ready) is None
    unknown = node(status={"conditions": [{"type": "Ready", "status": "Unknown"}]})
    assert reject(tolerant, unknown) == "node(s) had untolerated taint {node.kubernetes.io/unreachable: }"
