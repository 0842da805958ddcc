"""The fit library (shared.fit) on the situations kube-scheduler's own plugin tests pose, one plugin at a
time: the answer, and the words, its plugin gives."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from shared.fit.check import Fit, unavailable
from shared.fit.cluster import Cluster, Held
from shared.fit.views import node_view, pod_view

ZONE, HOST = "topology.kubernetes.io/zone", "kubernetes.io/hostname"


def node(name: str = "n1", *, zone: str | None = "a", **extra: Any) -> dict[str, Any]:
    labels = {HOST: name, **({ZONE: zone} if zone else {}), **extra.pop("labels", {})}
    allocatable = {"cpu": "4", "memory": "8Gi", "pods": "3", **extra.pop("allocatable", {})}
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": extra.pop("spec", {}),
        "status": {"allocatable": allocatable, **extra},
    }


def pod(
    name: str = "p", where: str | None = None, *, labels: dict[str, str] | None = None, **spec: Any
) -> dict[str, Any]:
    requests = spec.pop("requests", {})
    containers = [{"name": "c", "image": "i", "resources": {"requests": requests}}]
    body = {"containers": containers, **spec, **({"nodeName": where} if where else {})}
    meta = {"name": name, "namespace": "default", "labels": labels or {"app": name.split("-", maxsplit=1)[0]}}
    return {"metadata": meta, "spec": body, "status": {"phase": "Running" if where else "Pending"}}


def reasons(
    incoming: dict[str, Any], nodes: list[dict[str, Any]], placed: Sequence[dict[str, Any]] = ()
) -> dict[str, tuple[str, ...]]:
    cluster = Cluster.of([node_view(n) for n in nodes], [pod_view(p) for p in placed])
    return Fit(cluster, pod_view(incoming)).verdicts()


# NodeResourcesFit


def test_a_pod_requesting_nothing_fits_a_full_node_but_not_one_pod_too_many() -> None:
    full = [pod(f"x-{i}", "n1", requests={"cpu": "1"}) for i in range(2)]
    assert reasons(pod(), [node(allocatable={"cpu": "2"})], full) == {"n1": ()}
    assert reasons(pod(), [node()], [*full, pod("x-2", "n1")]) == {"n1": ("Too many pods",)}


def test_every_resource_short_is_named_extended_ones_included() -> None:
    busy = [pod("x-0", "n1", requests={"cpu": "3", "memory": "7Gi"})]
    asked = pod(requests={"cpu": "2", "memory": "2Gi", "example.com/gpu": "1"})
    got = reasons(asked, [node()], busy)
    assert got == {"n1": ("Insufficient cpu", "Insufficient memory", "Insufficient example.com/gpu")}
    assert unavailable(got) == (
        "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient example.com/gpu, 1 Insufficient memory."
    )


def test_init_containers_count_by_their_largest_and_overhead_adds() -> None:
    init = [{"name": "i", "image": "i", "resources": {"requests": {"cpu": "4"}}}]
    assert reasons(pod(requests={"cpu": "1"}, initContainers=init), [node()]) == {"n1": ()}
    assert reasons(pod(requests={"cpu": "1"}, overhead={"cpu": "3500m"}), [node()]) == {
        "n1": ("Insufficient cpu",)
    }


def test_room_a_reservation_holds_is_taken_but_for_the_pod_it_is_for() -> None:
    cluster = Cluster.of(
        [node_view(node())], [], held=[Held("r", "n1", {"cpu": 3000}, frozenset({"default/mine"}))]
    )
    for name, said in (("other", ("Insufficient cpu",)), ("mine", ())):
        asked = pod_view(pod(name, requests={"cpu": "2"}))
        assert Fit(cluster, asked).reasons(cluster.nodes["n1"]) == said


# NodeUnschedulable, TaintToleration, NodeAffinity: their order and their words


@pytest.mark.parametrize(
    ("spec", "tolerations", "said"),
    [
        ({"unschedulable": True}, [], "node(s) were unschedulable"),
        ({"unschedulable": True}, [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}], None),
        (
            {"taints": [{"key": "k", "value": "v", "effect": "NoExecute"}]},
            [],
            "node(s) had untolerated taint {k: v}",
        ),
        ({"taints": [{"key": "k", "value": "v", "effect": "PreferNoSchedule"}]}, [], None),
        ({"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]}, [{"operator": "Exists"}], None),
        (
            {"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]},
            [{"key": "k", "operator": "Exists", "effect": "NoExecute"}],
            "node(s) had untolerated taint {k: v}",
        ),
        (
            {"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]},
            [{"key": "k", "value": "w"}],
            "node(s) had untolerated taint {k: v}",
        ),
    ],
)
def test_cordons_and_taints(
    spec: dict[str, Any], tolerations: list[dict[str, Any]], said: str | None
) -> None:
    # A node selector it fails too: the cordon or the taint is said first, as those plugins run first.
    asked = pod(tolerations=tolerations, nodeSelector={"disk": "ssd"})
    got = reasons(asked, [node(spec=spec)])["n1"]
    assert got == ((said,) if said else ("node(s) didn't match Pod's node affinity/selector",))


@pytest.mark.parametrize(
    ("terms", "fits"),
    [
        ([{"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["a", "b"]}]}], True),
        ([{"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["4"]}]}], True),
        ([{"matchExpressions": [{"key": "gen", "operator": "Lt", "values": ["4"]}]}], False),
        ([{"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["x"]}]}], False),  # not a number
        ([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}], True),
        (
            [
                {"matchExpressions": [{"key": "missing", "operator": "Exists"}]},
                {"matchExpressions": [{"key": ZONE, "operator": "Exists"}]},
            ],
            True,
        ),
        ([{}], False),  # an empty term selects nothing
        ([], False),  # no term at all: nothing
    ],
)
def test_required_node_affinity(terms: list[dict[str, Any]], fits: bool) -> None:
    needed = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
    got = reasons(pod(affinity={"nodeAffinity": needed}), [node(labels={"gen": "5"})])["n1"]
    assert got == (() if fits else ("node(s) didn't match Pod's node affinity/selector",))


# PodTopologySpread


def spread(**extra: Any) -> list[dict[str, Any]]:
    constraint = {
        "maxSkew": 1,
        "topologyKey": ZONE,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "web"}},
    }
    return [{**constraint, **extra}]


def test_spread_counts_matching_pods_per_zone_and_needs_the_key() -> None:
    nodes = [node("a1", zone="a"), node("b1", zone="b"), node("bare", zone=None)]
    placed = [pod("web-0", "a1")]
    got = reasons(pod("web-1", topologySpreadConstraints=spread()), nodes, placed)
    assert got == {
        "a1": ("node(s) didn't match pod topology spread constraints",),
        "b1": (),
        "bare": ("node(s) didn't match pod topology spread constraints (missing required label)",),
    }
    # With fewer domains than minDomains, the smallest count is 0: only an empty zone takes it.
    got = reasons(
        pod("web-1", topologySpreadConstraints=spread(minDomains=3)), nodes[:2], [*placed, pod("web-2", "b1")]
    )
    assert got == {
        "a1": ("node(s) didn't match pod topology spread constraints",),
        "b1": ("node(s) didn't match pod topology spread constraints",),
    }


def test_a_pod_its_own_selector_does_not_match_is_not_counted_for_itself() -> None:
    nodes = [node("a1", zone="a"), node("b1", zone="b")]
    other = pod("db-0", labels={"app": "db"}, topologySpreadConstraints=spread())
    assert reasons(other, nodes, [pod("web-0", "a1")]) == {"a1": (), "b1": ()}


# InterPodAffinity


def term(**labels: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": labels}, "topologyKey": ZONE}


def test_affinity_first_of_a_group_and_the_key_it_needs() -> None:
    nodes = [node("a1", zone="a"), node("bare", zone=None)]
    own = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(app="web")]}}
    assert reasons(pod("web-0", affinity=own), nodes) == {
        "a1": (),
        "bare": ("node(s) didn't match pod affinity rules",),
    }
    # A pod of another app with the same terms is no first of its group: nothing matches it anywhere.
    assert reasons(pod("api-0", affinity=own), nodes) == dict.fromkeys(
        ("a1", "bare"), ("node(s) didn't match pod affinity rules",)
    )


def test_anti_affinity_both_ways() -> None:
    nodes = [node("a1", zone="a"), node("b1", zone="b")]
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(app="web")]}}
    assert reasons(pod("web-1", affinity=anti), nodes, [pod("web-0", "a1")]) == {
        "a1": ("node(s) didn't match pod anti-affinity rules",),
        "b1": (),
    }
    # A placed pod's anti-affinity keeps others out of its zone.
    assert reasons(pod("web-1"), nodes, [pod("db-0", "b1", affinity=anti)]) == {
        "a1": (),
        "b1": ("node(s) didn't satisfy existing pods anti-affinity rules",),
    }
