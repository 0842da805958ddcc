"""One scenario on either engine, scoped to one test: its own namespace and nodes, so that tests share one
real control plane (a namespace per test) as they would a cluster, and meet kubesim the same way."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from podherd.realcluster.scenario_objects import nodes

if TYPE_CHECKING:
    from tests.conformance.conftest import Scoped

SCOPE_LABEL = "podherd.io/test-scope"


def scoped(document: dict[str, Any], scope: str) -> dict[str, Any]:
    """`document` with its namespace `default` renamed `scope`, its nodes prefixed `scope-` and labelled, and
    every pod kept to those nodes by a node selector (Podherd copies it into the replacement's room)."""
    out = copy.deepcopy(document)
    for group in out.get("nodes") or []:
        group["name"] = f"{scope}-{group['name']}"
        group["labels"] = {**(group.get("labels") or {}), SCOPE_LABEL: scope}
    for item in (*(out.get("workloads") or []), *(out.get("pods") or [])):
        if item.get("namespace", "default") == "default":
            item["namespace"] = scope
        item["nodeSelector"] = {**(item.get("nodeSelector") or {}), SCOPE_LABEL: scope}
        if item.get("node"):
            item["node"] = f"{scope}-{item['node']}"
        item["placement"] = [f"{scope}-{n}" for n in item.get("placement") or []]
        # Graceful deletion takes the grace period on the real engine (kwok confirms it then): short.
        item.setdefault("terminationGracePeriodSeconds", 1)
    out["namespaces"] = [*(out.get("namespaces") or []), scope]
    return out


def add_node(c: Scoped, name: str, *, cpu: str) -> None:
    """A node of the test's own, made as the scenario makes them (kwok runs it on the real engine)."""
    group = {"name": f"{c.scope}-{name}", "capacity": {"cpu": cpu, "memory": "16Gi"}}
    group["labels"] = {SCOPE_LABEL: c.scope}
    (node,) = nodes(group)
    c.kube.core.create_node(node)


def cluster(
    nodes: int = 3, web: int = 3, node_cpu: int = 4, cpu: str = "1", **web_extra: Any
) -> dict[str, Any]:
    """`nodes` nodes and a Deployment `web` of `web` replicas through koord-scheduler."""
    return {
        "nodes": [{"name": "node-{i}", "count": nodes, "capacity": {"cpu": str(node_cpu), "memory": "16Gi"}}],
        "workloads": [
            {
                "kind": "Deployment",
                "name": "web",
                "replicas": web,
                "requests": {"cpu": cpu, "memory": "1Gi"},
                "schedulerName": "koord-scheduler",
                **web_extra,
            }
        ],
    }
