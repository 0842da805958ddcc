"""Whether a pod fits a node (shared.node_fit), as kube-scheduler's filters decide and say it: room,
nodeSelector, required node affinity, taints and tolerations (cordoned and NotReady nodes tainted as the
node lifecycle controller taints them); and whether it would fit another node, as the descheduler's NodeFit
decides (Koordinator's nodeFit)."""

from __future__ import annotations

from typing import Any

import pytest

from shared.node_fit import (
    AFFINITY_MISMATCH,
    ANTI_AFFINITY,
    UNSCHEDULABLE,
    allocatable,
    elsewhere,
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
    assert insufficient(node(), {"cpu": 3000}, {"cpu": 1000}) is None
    assert insufficient(node(), {"cpu": 3500}, {"cpu": 1000}) == "Insufficient cpu"
    assert insufficient(node(), {"pods": 110_000}, {"pods": 1000}) == "Too many pods"
    # A Reservation's own room counts for the pod that takes it.
    assert insufficient(node(), {"cpu": 3500}, {"cpu": 1000}, bonus={"cpu": 1000}) is None


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


def pod(name: str, cpu: str = "1", *, phase: str = "Running", **spec: Any) -> dict[str, Any]:
    containers = [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu}}}]
    return {
        "metadata": {"name": name, "namespace": "default", "labels": {"app": name.split("-", 1)[0]}},
        "spec": {"containers": containers, **spec},
        "status": {"phase": phase},
    }


def test_another_node_fits_with_the_room_its_pods_leave() -> None:
    there = [pod("db-0", "2"), pod("db-1", "1")]
    assert elsewhere(pod("web-0", "1"), node(), there) is None
    assert elsewhere(pod("web-0", "2"), node(), there) == "Insufficient cpu"
    # A pod that has ended holds nothing.
    assert elsewhere(pod("web-0", "2"), node(), [*there[:1], pod("db-1", "1", phase="Succeeded")]) is None


def test_a_cordoned_node_is_out_even_for_a_pod_that_tolerates_everything() -> None:
    everything = pod("ds-0", tolerations=[{"operator": "Exists"}])
    assert elsewhere(everything, node(spec={"unschedulable": True}), ()) == UNSCHEDULABLE
    assert elsewhere(pod("web-0", nodeSelector={"zone": "b"}), node(), ()) == AFFINITY_MISMATCH


def test_a_pod_there_that_the_pods_required_anti_affinity_rules_out() -> None:
    term = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "zone"}
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    moving = pod("web-0", affinity=anti)
    assert elsewhere(moving, node(), [pod("web-1")]) == ANTI_AFFINITY
    assert elsewhere(moving, node(), [pod("db-0")]) is None
    assert elsewhere(moving, node(), [pod("web-0")]) is None  # itself (as the descheduler skips it by name)
    elsewhere_ns = {
        **pod("web-1"),
        "metadata": {"name": "web-1", "namespace": "other", "labels": {"app": "web"}},
    }
    assert elsewhere(moving, node(), [elsewhere_ns]) is None  # the term's namespaces: the pod's own
    unlabelled = {**node(), "metadata": {"name": "node-a", "labels": {}}}
    assert elsewhere(moving, unlabelled, [pod("web-1")]) is None  # no such topology on the node
