"""Podherd's fit library (`shared.fit`) and kubesim's scheduler, written apart, give the same answer for
every node on generated clusters: the same nodes fit, and each node that does not is refused by the same
filter in the same words (all of NodeResourcesFit's shortfalls). Where they disagreed, kube-scheduler's
plugins decided which one was wrong (docs/design/fit.md lists what that fixed).

Each case is a few nodes (zones, labels, taints, cordons, NotReady, small pod limits, an extended resource),
pods already placed (some terminating, some with anti-affinity, in two namespaces, some with volumes pinned
to a zone or a node), and one pod to place with any of: requests, a node selector, required node affinity
(every operator, matchFields), tolerations, pod affinity and anti-affinity, spread constraints (maxSkew,
minDomains, matchLabelKeys) and claims.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from kubesim.apiserver import kinds
from kubesim.apiserver.store import Store
from kubesim.controllers.scheduler import Scheduler, verdicts
from kubesim.options import SimOptions
from shared.fit.check import Fit, unavailable
from shared.fit.cluster import Cluster
from shared.fit.views import node_view, pod_view, volume_view

Obj = dict[str, Any]
ZONE, HOST = "topology.kubernetes.io/zone", "kubernetes.io/hostname"
APPS = ("web", "db", "cache")
CASES = 240


def _node(rng: random.Random, i: int) -> Obj:
    name = f"n{i}"
    labels = {HOST: name, "disk": rng.choice(["ssd", "hdd"]), "gen": str(rng.randint(3, 6))}
    if rng.random() < 0.85:
        labels[ZONE] = rng.choice("abc")
    allocatable = {"cpu": str(rng.choice([2, 4, 8])), "memory": f"{rng.choice([4, 8, 16])}Gi"}
    allocatable["pods"] = str(rng.choice([3, 110, 110, 110]))
    if rng.random() < 0.3:
        allocatable["example.com/gpu"] = str(rng.randint(1, 2))
    spec: Obj = {}
    roll = rng.random()
    if roll < 0.07:
        spec["unschedulable"] = True
    elif roll < 0.2:
        effect = rng.choice(["NoSchedule", "NoExecute", "PreferNoSchedule"])
        spec["taints"] = [{"key": "dedicated", "value": rng.choice(["db", "gpu"]), "effect": effect}]
    ready = "True" if rng.random() > 0.08 else rng.choice(["False", "Unknown"])
    status = {
        "allocatable": allocatable,
        "capacity": allocatable,
        "conditions": [{"type": "Ready", "status": ready}],
    }
    return {
        "metadata": {"name": name, "labels": labels, "uid": f"uid-{name}"},
        "spec": spec,
        "status": status,
    }


def _containers(rng: random.Random, *, gpu: bool = False, big: bool = False) -> list[Obj]:
    cpu = rng.choice([100, 200, 500, 1000, 3000] if big else [100, 200, 500, 1000])
    requests = {
        "cpu": f"{cpu}m",
        "memory": f"{rng.choice([256, 512, 1024, 6144] if big else [256, 512, 1024])}Mi",
    }
    if gpu:
        requests["example.com/gpu"] = "1"
    return [{"name": "c", "image": "i", "resources": {"requests": requests}}]


def _term(rng: random.Random) -> Obj:
    term: Obj = {
        "labelSelector": {"matchLabels": {"app": rng.choice(APPS)}},
        "topologyKey": rng.choice([ZONE, HOST]),
    }
    roll = rng.random()
    if roll < 0.15:
        term["namespaces"] = ["other"]
    elif roll < 0.25:
        term["namespaceSelector"] = {}
    return term


def _placed(rng: random.Random, i: int, nodes: list[Obj]) -> Obj:
    app = rng.choice(APPS)
    meta: Obj = {
        "name": f"p{i}",
        "namespace": rng.choice(["default", "default", "other"]),
        "labels": {"app": app, "rev": rng.choice(["1", "2"])},
        "uid": f"uid-p{i}",
    }
    if rng.random() < 0.1:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    spec: Obj = {
        "containers": _containers(rng, gpu=rng.random() < 0.1),
        "nodeName": rng.choice(nodes)["metadata"]["name"],
    }
    if rng.random() < 0.3:
        spec["affinity"] = {
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term(rng)]}
        }
    return {"metadata": meta, "spec": spec, "status": {"phase": "Running"}}


def _node_terms(rng: random.Random) -> list[Obj]:
    choices = [
        {"key": ZONE, "operator": "In", "values": rng.sample("abc", 2)},
        {"key": ZONE, "operator": "NotIn", "values": ["a"]},
        {"key": "disk", "operator": "Exists"},
        {"key": ZONE, "operator": "DoesNotExist"},
        {"key": "gen", "operator": rng.choice(["Gt", "Lt"]), "values": ["4"]},
    ]
    terms: list[Obj] = [
        {"matchExpressions": rng.sample(choices, rng.randint(1, 2))} for _ in range(rng.randint(1, 2))
    ]
    if rng.random() < 0.2:
        terms.append({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n0", "n1"]}]})
    return terms


def _incoming(rng: random.Random) -> Obj:
    app = rng.choice(APPS)
    spec: Obj = {"containers": _containers(rng, gpu=rng.random() < 0.15, big=True)}
    affinity: Obj = {}
    if rng.random() < 0.2:
        spec["nodeSelector"] = {"disk": rng.choice(["ssd", "hdd"])}
    if rng.random() < 0.3:
        needed = {"nodeSelectorTerms": _node_terms(rng)}
        affinity["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": needed}
    if rng.random() < 0.3:
        spec["tolerations"] = [
            rng.choice(
                [
                    {"key": "dedicated", "operator": "Equal", "value": "db"},
                    {"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"},
                    {"operator": "Exists"},
                    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists"},
                    {"key": "node.kubernetes.io/not-ready", "operator": "Exists"},
                ]
            )
        ]
    if rng.random() < 0.2:
        affinity["podAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [_term(rng) for _ in range(rng.randint(1, 2))]
        }
    if rng.random() < 0.35:
        affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [_term(rng)]}
    if affinity:
        spec["affinity"] = affinity
    if rng.random() < 0.45:
        spec["topologySpreadConstraints"] = [_spread(rng, app) for _ in range(rng.randint(1, 2))]
    meta = {"name": "incoming", "namespace": "default", "labels": {"app": app, "rev": "2"}, "uid": "uid-in"}
    return {"metadata": meta, "spec": spec, "status": {"phase": "Pending"}}


def _spread(rng: random.Random, app: str) -> Obj:
    constraint: Obj = {
        "maxSkew": rng.choice([1, 1, 2]),
        "topologyKey": rng.choice([ZONE, HOST]),
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": rng.choice([app, *APPS])}},
    }
    if rng.random() < 0.3:
        constraint["minDomains"] = rng.randint(2, 4)
    if rng.random() < 0.3:
        constraint["matchLabelKeys"] = ["rev"]
    return constraint


def _volumes(rng: random.Random, pod: Obj, nodes: list[Obj]) -> list[tuple[str, Obj]]:
    """A claim of the pod bound to a volume confined to a zone or to a node."""
    volume: Obj = {
        "metadata": {"name": "pv-0", "labels": {}, "uid": "uid-pv"},
        "spec": {"capacity": {"storage": "1Gi"}},
    }
    if rng.random() < 0.5:
        volume["metadata"]["labels"][ZONE] = rng.choice(["a", "b", "a__c"])
    else:
        where = rng.choice(nodes)["metadata"]["name"]
        term = {"matchExpressions": [{"key": HOST, "operator": "In", "values": [where]}]}
        volume["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": [term]}}
    claim = {
        "metadata": {"name": "data", "namespace": "default", "uid": "uid-pvc"},
        "spec": {"volumeName": "pv-0", "accessModes": ["ReadWriteOnce"]},
        "status": {"phase": "Bound"},
    }
    pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    return [("persistentvolumes", volume), ("persistentvolumeclaims", claim)]


def case(seed: int) -> tuple[list[Obj], list[Obj], Obj, list[tuple[str, Obj]]]:
    rng = random.Random(seed)
    nodes = [_node(rng, i) for i in range(rng.randint(3, 6))]
    placed = [_placed(rng, i, nodes) for i in range(rng.randint(0, 14))]
    incoming = _incoming(rng)
    volumes = _volumes(rng, incoming, nodes) if rng.random() < 0.15 else []
    return nodes, placed, incoming, volumes


def kubesim_says(
    nodes: list[Obj], placed: list[Obj], incoming: Obj, volumes: list[tuple[str, Obj]]
) -> dict[str, tuple[str, ...]]:
    store = Store(kinds.registry())
    scheduler = Scheduler(store, SimOptions(record_events=False))
    registry = store.registry
    for plural, obj in [("nodes", n) for n in nodes] + [("pods", p) for p in placed] + volumes:
        rt = registry.get("", "v1", plural)
        assert rt is not None
        store.put(rt, obj, "ADDED")
    return verdicts(scheduler, incoming)


def fit_says(
    nodes: list[Obj], placed: list[Obj], incoming: Obj, volumes: list[tuple[str, Obj]]
) -> dict[str, tuple[str, ...]]:
    pvs = {obj["metadata"]["name"]: obj for plural, obj in volumes if plural == "persistentvolumes"}
    bound = {
        f"{obj['metadata']['namespace']}/{obj['metadata']['name']}": volume_view(
            pvs[obj["spec"]["volumeName"]]
        )
        for plural, obj in volumes
        if plural == "persistentvolumeclaims"
    }
    cluster = Cluster.of([node_view(n) for n in nodes], [pod_view(p) for p in placed], volumes=bound)
    return Fit(cluster, pod_view(incoming)).verdicts()


@pytest.mark.parametrize("chunk", range(4))
def test_the_fit_library_and_kubesims_scheduler_agree_on_every_node(chunk: int) -> None:
    per_chunk = CASES // 4
    fits = refused = 0
    for seed in range(chunk * per_chunk, (chunk + 1) * per_chunk):
        nodes, placed, incoming, volumes = case(seed)
        expected = kubesim_says(nodes, placed, incoming, volumes)
        got = fit_says(nodes, placed, incoming, volumes)
        assert got == expected, f"seed {seed}: {incoming['spec']}"
        fits += sum(1 for reasons in got.values() if not reasons)
        refused += sum(1 for reasons in got.values() if reasons)
    # The generator reaches both answers often: neither "everything fits" nor "nothing does" dominates.
    assert fits >= per_chunk * 3 // 4 and refused >= per_chunk * 2


def test_the_cases_reach_every_filter() -> None:
    """Every plugin's refusal comes up in the generated cases, so agreement covers each of them."""
    seen: set[str] = set()
    for seed in range(CASES):
        for reasons in fit_says(*case(seed)).values():
            seen.update(r.split(" {")[0] for r in reasons)
    assert {
        "node(s) were unschedulable",
        "node(s) had untolerated taint",
        "node(s) didn't match Pod's node affinity/selector",
        "Too many pods",
        "Insufficient cpu",
        "Insufficient memory",
        "Insufficient example.com/gpu",
        "node(s) had volume node affinity conflict",
        "node(s) had no available volume zone",
        "node(s) didn't match pod topology spread constraints",
        "node(s) didn't match pod topology spread constraints (missing required label)",
        "node(s) didn't match pod affinity rules",
        "node(s) didn't match pod anti-affinity rules",
        "node(s) didn't satisfy existing pods anti-affinity rules",
    } <= seen, seen
    assert unavailable({"n0": ("Insufficient cpu", "Insufficient memory"), "n1": ("Insufficient cpu",)}) == (
        "0/2 nodes are available: 2 Insufficient cpu, 1 Insufficient memory."
    )
