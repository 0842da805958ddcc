"""kubesim's pure parts: quantities, selectors, the three patch kinds, printer-column paths."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.apiserver import builtin_openapi
from kubesim.apiserver.errors import ApiError
from kubesim.apiserver.patch import json_patch, merge_patch, strategic_merge_patch
from kubesim.apiserver.selectors import match_label_selector, parse_field_selector, parse_label_selector
from kubesim.apiserver.tables import json_path
from kubesim.controllers.node_search import feasible_nodes_to_find
from shared.api.quantity import format_milli, milli, pod_requests


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", 500),
        ("1", 1000),
        ("2.5", 2500),
        ("1Ki", 1024_000),
        ("1Gi", (1 << 30) * 1000),
        ("1G", 10**12),
        ("100M", 10**11),
        ("0.1", 100),
        ("1e3", 1_000_000),
        ("1m", 1),
    ],
)
def test_quantities(text: str, value: int) -> None:
    assert milli(text) == value


def test_quantity_errors_and_formatting() -> None:
    with pytest.raises(ValueError, match="invalid quantity"):
        milli("lots")
    assert format_milli(1500, "cpu") == "1500m" and format_milli(2000, "cpu") == "2"
    assert format_milli((1 << 30) * 1000, "memory") == "1Gi"


def test_pod_requests_follow_the_scheduler() -> None:
    spec = {
        "containers": [{"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}, {"resources": {}}],
        "initContainers": [{"resources": {"requests": {"cpu": "2"}}}],
        "overhead": {"cpu": "100m"},
    }
    assert pod_requests(spec) == {"cpu": 2100, "memory": (1 << 30) * 1000, "pods": 1000}


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ("app=web", {"app": "web"}, True),
        ("app==web", {"app": "api"}, False),
        ("app!=web", {}, True),
        ("app in (web, api),tier", {"app": "api", "tier": "1"}, True),
        ("app notin (web)", {"app": "web"}, False),
        ("!canary", {"canary": "x"}, False),
        ("tier", {"app": "x"}, False),
    ],
)
def test_label_selectors(selector: str, labels: dict[str, str], expected: bool) -> None:
    matcher = parse_label_selector(selector)
    assert matcher is not None and matcher(labels) is expected


def test_bad_selectors_are_400() -> None:
    with pytest.raises(ApiError) as err:
        parse_field_selector("spec.nodeName=a", frozenset({"metadata.name"}))
    assert err.value.code == 400 and "field label not supported" in err.value.message
    with pytest.raises(ApiError):
        parse_label_selector("=x")


def test_field_selectors() -> None:
    matcher = parse_field_selector(
        "spec.nodeName=n1,status.phase!=Failed", frozenset({"spec.nodeName", "status.phase"})
    )
    assert matcher is not None
    assert matcher({"spec": {"nodeName": "n1"}, "status": {"phase": "Running"}})
    assert not matcher({"spec": {"nodeName": "n1"}, "status": {"phase": "Failed"}})
    empty = parse_field_selector("spec.nodeName=", frozenset({"spec.nodeName"}))
    assert empty is not None and empty({"spec": {}})


def test_label_selector_objects() -> None:
    selector = {
        "matchLabels": {"app": "web"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["a", "b"]},
            {"key": "canary", "operator": "DoesNotExist"},
        ],
    }
    assert match_label_selector(selector, {"app": "web", "tier": "a"})
    assert not match_label_selector(selector, {"app": "web", "tier": "c"})
    assert not match_label_selector(selector, {"app": "web", "tier": "a", "canary": "1"})
    assert match_label_selector({}, {"anything": "x"})
    assert not match_label_selector(None, {})


def test_merge_patch() -> None:
    target = {"a": {"b": 1, "c": 2}, "l": [1, 2]}
    assert merge_patch(target, {"a": {"b": None, "d": 3}, "l": [3]}) == {"a": {"c": 2, "d": 3}, "l": [3]}
    assert target == {"a": {"b": 1, "c": 2}, "l": [1, 2]}  # not mutated


def test_strategic_merge_patch() -> None:
    pod = builtin_openapi.schema_of("", "v1", "Pod")
    target: dict[str, Any] = {
        "spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "1"}]},
        "metadata": {"finalizers": ["x"], "labels": {"k": "v"}},
    }
    patched = strategic_merge_patch(
        target,
        {
            "spec": {"containers": [{"name": "b", "image": "2"}, {"name": "c", "image": "1"}]},
            "metadata": {"finalizers": ["y"], "labels": {"k": None}},
        },
        pod,
    )
    assert [(c["name"], c["image"]) for c in patched["spec"]["containers"]] == [
        ("a", "1"),
        ("b", "2"),
        ("c", "1"),
    ]
    assert patched["metadata"] == {"finalizers": ["x", "y"], "labels": {}}
    deleted = strategic_merge_patch(
        target, {"spec": {"containers": [{"name": "a", "$patch": "delete"}]}}, pod
    )
    assert [c["name"] for c in deleted["spec"]["containers"]] == ["b"]
    replaced = strategic_merge_patch(target, {"spec": {"$patch": "replace", "containers": []}}, pod)
    assert replaced["spec"] == {"containers": []}


def test_json_patch() -> None:
    doc = {"metadata": {"labels": {"a": "1"}}, "items": [1, 2]}
    out = json_patch(
        doc,
        [
            {"op": "add", "path": "/metadata/labels/b~1c", "value": "2"},
            {"op": "replace", "path": "/items/0", "value": 9},
            {"op": "remove", "path": "/metadata/labels/a"},
            {"op": "add", "path": "/items/-", "value": 3},
            {"op": "test", "path": "/items/1", "value": 2},
            {"op": "copy", "from": "/items/0", "path": "/first"},
        ],
    )
    assert out == {"metadata": {"labels": {"b/c": "2"}}, "items": [9, 2, 3], "first": 9}
    with pytest.raises(ApiError) as err:
        json_patch(doc, [{"op": "test", "path": "/items/0", "value": 7}])
    assert err.value.code == 422
    with pytest.raises(ApiError):
        json_patch(doc, [{"op": "remove", "path": "/nope"}])


def test_printer_column_paths() -> None:
    obj = {"spec": {"podRef": {"name": "p"}}, "status": {"conditions": [{"type": "A"}]}}
    assert json_path(obj, ".spec.podRef.name") == "p"
    assert json_path(obj, ".status.conditions[0].type") == "A"
    assert json_path(obj, ".status.phase") is None


@pytest.mark.parametrize(
    ("nodes", "percentage", "wanted"),
    [
        (50, 0, 50),  # under 100 nodes: every node
        (100, 0, 100),
        (1000, 0, 420),  # 50% less 1% per 125 nodes
        (5000, 0, 500),
        (6000, 0, 300),  # never under 5%
        (20000, 0, 1000),
        (1000, 30, 300),  # percentageOfNodesToScore set
        (1000, 5, 100),  # never under 100 nodes
        (1000, 150, 1000),
    ],
)
def test_the_feasible_nodes_a_search_finds_are_kube_schedulers(
    nodes: int, percentage: int, wanted: int
) -> None:
    assert feasible_nodes_to_find(nodes, percentage) == wanted
