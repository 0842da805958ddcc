"""kubesim's ReplicaSet picks its scale-down victims in the order of Kubernetes' ReplicaSet controller."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.apiserver.records import now_iso, parse_iso
from kubesim.controllers.scale_down import deletion_cost, victims

NOW = parse_iso("2026-11-25T12:00:00Z")


def pod(
    name: str,
    *,
    node: str | None = "n1",
    phase: str = "Running",
    ready_for: float | None = 3600.0,
    cost: str | None = None,
    restarts: int = 0,
    age: float = 7200.0,
) -> dict[str, Any]:
    annotations = {"controller.kubernetes.io/pod-deletion-cost": cost} if cost is not None else {}
    conditions = []
    if ready_for is not None:
        conditions.append({"type": "Ready", "status": "True", "lastTransitionTime": now_iso(NOW - ready_for)})
    return {
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "annotations": annotations,
            "creationTimestamp": now_iso(NOW - age),
        },
        "spec": {"nodeName": node} if node else {},
        "status": {
            "phase": phase,
            "conditions": conditions,
            "containerStatuses": [{"name": "c", "restartCount": restarts}],
        },
    }


def first(*pods: dict[str, Any], related: list[dict[str, Any]] | None = None) -> str:
    chosen = victims(list(pods), related if related is not None else list(pods), count=1, now=NOW)
    return str(chosen[0]["metadata"]["name"])


def test_each_rule_decides_when_the_ones_before_it_tie() -> None:
    unassigned = pod("unassigned", node=None, phase="Pending", ready_for=None)
    assert first(pod("assigned"), unassigned) == "unassigned"
    assert first(pod("running"), pod("pending", phase="Pending", ready_for=None)) == "pending"
    assert first(pod("running"), pod("unknown", phase="Unknown")) == "unknown"
    assert first(pod("ready"), pod("not-ready", ready_for=None)) == "not-ready"
    assert first(pod("costly", cost="10"), pod("cheap", cost="-5")) == "cheap"
    doubled = [pod("alone", node="n2"), pod("doubled", node="n1"), pod("neighbour", node="n1")]
    assert first(doubled[0], doubled[1], related=doubled) == "doubled"
    assert first(pod("ready-long", ready_for=4000.0), pod("ready-lately", ready_for=10.0)) == "ready-lately"
    assert first(pod("steady"), pod("crashy", restarts=3)) == "crashy"
    assert first(pod("old", ready_for=None), pod("young", ready_for=None, age=60.0)) == "young"


def test_the_deletion_cost_outranks_age_and_colocation() -> None:
    """What a surge relies on: the old pod, marked with the lowest cost, goes though the new one is younger
    and shares its node with a sibling."""
    old = pod("old", node="n2", age=86_400.0, cost="-2147483648")
    new = pod("new", node="n1", ready_for=5.0, age=20.0)
    sibling = pod("sibling", node="n1")
    assert first(old, new, related=[old, new, sibling]) == "old"


def test_times_in_the_same_power_of_two_tie_and_the_uid_decides() -> None:
    # 1000 s and 1030 s ago are both within [2^39, 2^40) nanoseconds: equal ranks, the smaller uid first.
    a, b = pod("b-pod", ready_for=1030.0), pod("a-pod", ready_for=1000.0)
    assert first(a, b) == "a-pod"
    assert first(b, a) == "a-pod"


def test_a_pod_without_a_creation_time_goes_first_among_equals() -> None:
    unknown = pod("unknown", ready_for=None)
    del unknown["metadata"]["creationTimestamp"]
    assert first(pod("known", ready_for=None), unknown) == "unknown"


@pytest.mark.parametrize(
    ("value", "cost"),
    [
        ("7", 7),
        ("-7", -7),
        ("0", 0),
        ("-007", -7),
        ("+7", 0),
        ("007", 0),
        ("-", 0),
        ("1.5", 0),
        ("2147483647", 2147483647),
        ("2147483648", 0),
        ("-2147483648", -2147483648),
        ("", 0),
    ],
)
def test_the_deletion_cost_is_read_as_the_controller_reads_it(value: str, cost: int) -> None:
    assert deletion_cost(pod("p", cost=value)) == cost


def test_all_go_when_as_many_are_asked_for_as_there_are() -> None:
    pods = [pod("a"), pod("b")]
    assert victims(pods, pods, count=2, now=NOW) == pods
