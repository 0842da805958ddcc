"""kubesim's scheduler places pods by the pods already placed, as kube-scheduler's InterPodAffinity and
PodTopologySpread filters do: required anti-affinity (the pod's own and placed pods'), required affinity
(the first pod of a group that selects itself included), and DoNotSchedule spread over zones; and what a
pod prefers, scored as kube-scheduler's default profile weighs it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from kubesim.sim import SimHandle
from tests.kube import Kube, client_for, watch_until

pytestmark = [pytest.mark.integration]
ZONE, HOST = "topology.kubernetes.io/zone", "kubernetes.io/hostname"


@pytest.fixture
def kube(kubesim_factory: Callable[..., SimHandle]) -> Kube:
    capacity = {"cpu": "8", "memory": "16Gi", "pods": "110"}
    scenario = {
        "name": "zones",
        "nodes": [
            {"name": "a-{i}", "count": 2, "capacity": capacity, "labels": {ZONE: "a"}},
            {"name": "b-{i}", "count": 2, "capacity": capacity, "labels": {ZONE: "b"}},
            {"name": "bare-{i}", "count": 1, "capacity": capacity},  # no zone label
        ],
    }
    return client_for(kubesim_factory(scenario))


def pod(name: str, labels: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "i"}], **spec},
    }


def term(key: str, **labels: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": labels}, "topologyKey": key}


def placed(kube: Kube, names: list[str]) -> dict[str, Any]:
    """Each pod's node, or its PodScheduled condition's message once it is found unschedulable."""

    def where(p: Any) -> Any:
        if p.spec.node_name:
            return p.spec.node_name
        scheduled = next((c for c in p.status.conditions or [] if c.type == "PodScheduled"), None)
        return scheduled.message if scheduled is not None and scheduled.reason == "Unschedulable" else None

    found = watch_until(
        kube.core.list_namespaced_pod,
        lambda pods: all(f"default/{n}" in pods and where(pods[f"default/{n}"]) for n in names),
        namespace="default",
    )
    return {n: where(found[f"default/{n}"]) for n in names}


def test_required_anti_affinity_spreads_a_group_and_refuses_the_one_too_many(kube: Kube) -> None:
    spread = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(ZONE, app="db")]}}
    names = [f"db-{i}" for i in range(4)]
    for name in names:
        kube.core.create_namespaced_pod("default", pod(name, {"app": "db"}, affinity=spread))
    where = placed(kube, names)
    # One in each zone; a node without the zone label is outside every zone, where the term does not apply.
    assert Counter(n.split("-")[0] for n in where.values()) == {"a": 1, "b": 1, "bare": 2}, where
    kube.core.create_namespaced_pod(
        "default", pod("db-a", {"app": "db"}, affinity=spread, nodeSelector={ZONE: "a"})
    )
    message = placed(kube, ["db-a"])["db-a"]
    assert (
        message.startswith("0/5 nodes are available: ")
        and "2 node(s) didn't match pod anti-affinity rules" in message
    )


def test_required_affinity_follows_its_group_and_waits_for_one(kube: Kube) -> None:
    with_db = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(ZONE, app="db")]}}
    kube.core.create_namespaced_pod("default", pod("lonely", {"app": "web"}, affinity=with_db))
    assert "didn't match pod affinity rules" in placed(kube, ["lonely"])["lonely"]
    itself = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(ZONE, app="db")]}}
    kube.core.create_namespaced_pod(
        "default", pod("db-0", {"app": "db"}, affinity=itself, nodeSelector={ZONE: "b"})
    )
    kube.core.create_namespaced_pod("default", pod("web", {"app": "web"}, affinity=with_db))
    where = placed(kube, ["db-0", "web"])
    assert where["db-0"].startswith("b-") and where["web"].startswith("b-"), where


def test_a_placed_pods_anti_affinity_keeps_others_off_its_node(kube: Kube) -> None:
    quiet = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(HOST, app="noisy")]}}
    kube.core.create_namespaced_pod("default", pod("quiet", {"app": "quiet"}, affinity=quiet, nodeName="a-1"))
    pinned = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a-1"]}]}
    ]}}}  # fmt: skip
    kube.core.create_namespaced_pod("default", pod("noisy", {"app": "noisy"}, affinity=pinned))
    message = placed(kube, ["noisy"])["noisy"]
    assert "1 node(s) didn't satisfy existing pods anti-affinity rules" in message, message


def test_do_not_schedule_spread_keeps_zones_within_max_skew(kube: Kube) -> None:
    constraint = {
        "maxSkew": 1,
        "topologyKey": ZONE,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "web"}},
    }
    names = [f"web-{i}" for i in range(6)]
    for name in names:
        kube.core.create_namespaced_pod(
            "default", pod(name, {"app": "web"}, topologySpreadConstraints=[constraint])
        )
    where = placed(kube, names)
    assert Counter(n.split("-")[0] for n in where.values()) == {"a": 3, "b": 3}, where  # never the zoneless


# ---------------------------------------------------------------------------------------------------------
# What a pod prefers: scored as kube-scheduler's default profile weighs it, over the room on each node


def test_a_preferred_node_term_outweighs_room_and_a_prefer_no_schedule_taint_keeps_pods_off(
    kube: Kube,
) -> None:
    """Zone a holds a 6-CPU pod, so by room alone zone b, and then the bare node, would win."""
    kube.core.create_namespaced_pod("default", pod("filler", {}, nodeName="a-1", containers=[_cpu("6")]))
    kube.core.create_namespaced_pod("default", pod("filler-2", {}, nodeName="a-2", containers=[_cpu("6")]))
    prefer_a = {
        "weight": 10,
        "preference": {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["a"]}]},
    }
    kube.core.create_namespaced_pod(
        "default",
        pod("wants-a", {}, containers=[_cpu("1")], affinity={"nodeAffinity": {PREFERRED: [prefer_a]}}),
    )
    assert placed(kube, ["wants-a"])["wants-a"].startswith("a-")
    for name in ("b-1", "b-2", "bare-1"):
        kube.core.patch_node(name, {"spec": {"taints": [{"key": "spot", "effect": "PreferNoSchedule"}]}})
    kube.core.create_namespaced_pod("default", pod("avoids", {}, containers=[_cpu("1")]))
    assert placed(kube, ["avoids"])["avoids"].startswith("a-")
    tolerant = [{"key": "spot", "operator": "Exists", "effect": "PreferNoSchedule"}]
    kube.core.create_namespaced_pod(
        "default", pod("tolerates", {}, containers=[_cpu("1")], tolerations=tolerant)
    )
    assert not placed(kube, ["tolerates"])["tolerates"].startswith("a-")  # room decides again


def test_preferred_anti_affinity_and_schedule_anyway_spread_a_group_without_refusing_any(kube: Kube) -> None:
    apart = {"podAntiAffinity": {PREFERRED: [{"weight": 100, "podAffinityTerm": term(HOST, app="web")}]}}
    names = [f"web-{i}" for i in range(5)]
    for name in names:
        kube.core.create_namespaced_pod("default", pod(name, {"app": "web"}, affinity=apart))
        placed(kube, [name])
    assert len(set(placed(kube, names).values())) == 5  # one per node, though nothing required it
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": ZONE,
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app": "api"}},
        }
    ]
    zones = []
    for i in range(4):
        name = f"api-{i}"
        kube.core.create_namespaced_pod(
            "default", pod(name, {"app": "api"}, topologySpreadConstraints=spread)
        )
        zones.append(placed(kube, [name])[name].split("-")[0])
    assert Counter(zones) == {"a": 2, "b": 2}, zones  # the node without a zone scores 0 for the constraint


PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def _cpu(amount: str) -> dict[str, Any]:
    return {"name": "c", "image": "i", "resources": {"requests": {"cpu": amount}}}
