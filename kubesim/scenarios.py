"""kubesim's built-in scenarios: the defragmentation article's `fragmented` picture, `small`, the
maintenance and rebalance demos' clusters, and generated large clusters (`generate:NODES:PODS`).
kubesim.scenario loads them, as it loads scenario files."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

BUILTIN: dict[str, dict[str, Any]] = {}


def builtin(name: str) -> dict[str, Any]:
    if name not in BUILTIN:
        raise KeyError(f"unknown scenario {name!r}; built-in: {', '.join(sorted(BUILTIN))}")
    return copy.deepcopy(BUILTIN[name])


def node_pool(count: int, *, cpu: int, memory: str, pods: int = 110) -> list[dict[str, Any]]:
    """`count` nodes named node-1, node-2, ... of one capacity."""
    return [
        {
            "name": "node-{i}",
            "count": count,
            "capacity": {"cpu": str(cpu), "memory": memory, "pods": str(pods)},
        }
    ]


def fragmented(nodes: int = 6, node_cpu: int = 4) -> dict[str, Any]:
    """The defragmentation article's picture: every node half used by small pods, a pod as large as a node
    pending.

    Each node runs one `web` and one `api` replica of 1 CPU (web through koord-scheduler, with a PDB of
    maxUnavailable 1), so every node has 2 of 4 CPUs free: 2*N CPUs free in all, yet the 4-CPU `big` pod
    fits nowhere until some node is emptied.
    """
    names = [f"node-{i}" for i in range(1, nodes + 1)]
    return {
        "name": "fragmented",
        "nodes": node_pool(nodes, cpu=node_cpu, memory="16Gi", pods=110),
        "workloads": [
            {
                "kind": "Deployment",
                "name": "web",
                "namespace": "default",
                "replicas": nodes,
                "requests": {"cpu": "1", "memory": "1Gi"},
                "schedulerName": "koord-scheduler",
                "pdb": {"maxUnavailable": 1},
                "placement": names,
            },
            {
                "kind": "Deployment",
                "name": "api",
                "namespace": "default",
                "replicas": nodes,
                "requests": {"cpu": "1", "memory": "1Gi"},
                "schedulerName": "koord-scheduler",
                "placement": names,
            },
        ],
        "pods": [
            {
                "name": "big",
                "namespace": "default",
                "requests": {"cpu": str(node_cpu), "memory": "2Gi"},
                "schedulerName": "koord-scheduler",
                "labels": {"app": "big"},
            }
        ],
    }


def generate(
    nodes: int, pods: int, replicas_per_workload: int = 50, *, node_cpu: int = 64, namespaces: int = 10
) -> dict[str, Any]:
    """A large cluster: `nodes` nodes and `pods` pods in Deployments of `replicas_per_workload`."""
    workloads: Iterator[dict[str, Any]] = (
        {
            "kind": "Deployment",
            "name": f"app-{i}",
            "namespace": f"ns-{i % namespaces}",
            "replicas": min(replicas_per_workload, pods - i * replicas_per_workload),
            "requests": {"cpu": "100m", "memory": "128Mi"},
            "schedulerName": "koord-scheduler",
        }
        for i in range((pods + replicas_per_workload - 1) // replicas_per_workload)
    )
    return {
        "name": f"generated-{nodes}x{pods}",
        "namespaces": [f"ns-{i}" for i in range(namespaces)],
        "nodes": node_pool(nodes, cpu=node_cpu, memory="256Gi", pods=250),
        "workloads": list(workloads),
    }


def maintenance(nodes: int = 4, node_cpu: int = 8, ready_after: int = 2) -> dict[str, Any]:
    """A node to take down for maintenance (`node-1`), holding what real nodes hold: a single-replica
    Deployment (`solo`), one whose PodDisruptionBudget allows no disruption (`guarded`), one with a budget of
    one (`web`) and a StatefulSet's pod (`db`). New replicas are Ready only
    `ready_after` seconds after they start, as real ones are; there is room elsewhere for every pod."""
    probe = {"tcpSocket": {"port": 80}, "initialDelaySeconds": ready_after}

    def workload(name: str, replicas: int, placement: list[str], **extra: Any) -> dict[str, Any]:
        return {
            "kind": "Deployment",
            "name": name,
            "namespace": "default",
            "replicas": replicas,
            "requests": {"cpu": "1", "memory": "1Gi"},
            "schedulerName": "koord-scheduler",
            "placement": placement,
            "readinessProbe": probe,
            **extra,
        }

    return {
        "name": "maintenance",
        "nodes": node_pool(nodes, cpu=node_cpu, memory="32Gi", pods=110),
        "workloads": [
            workload("solo", 1, ["node-1"]),
            workload("guarded", 2, ["node-1", "node-2"], pdb={"minAvailable": 2}),
            workload("web", 3, ["node-1", "node-1", "node-3"], pdb={"maxUnavailable": 1}),
            workload("db", 2, ["node-1", "node-2"], kind="StatefulSet"),
        ],
    }


ZONE = "topology.kubernetes.io/zone"


def skewed(nodes: int = 50, node_cpu: int = 8) -> dict[str, Any]:
    """A cluster to rebalance: a fifth of the nodes (`hot-*`, zone a) 81 % full, the rest (`b-*`, `c-*`)
    almost empty, and a spread constraint violated.

    Each hot node runs five `web` replicas (1 CPU, priority 1000, a budget of 20 % unavailable) and one `db`
    replica (1.5 CPU, a StatefulSet, priority 0) that only zone a can take (its node selector). Every other
    `c-*` node runs one small `cache` replica (100m). `front` (6 replicas, a zone spread constraint of
    maxSkew 1) was placed all in zone b. A scheduler that places by spreading (least-allocated) sends a
    replacement to the emptiest node it may use.
    """
    hot = max(1, nodes // 5)
    zone_b = (nodes - hot) // 2
    zone_c = nodes - hot - zone_b
    capacity = {"cpu": str(node_cpu), "memory": "32Gi", "pods": "110"}
    hot_names = [f"hot-{i}" for i in range(1, hot + 1)]

    def deployment(
        name: str, replicas: int, cpu: str, *, placement: list[str], **extra: Any
    ) -> dict[str, Any]:
        return {
            "kind": "Deployment",
            "name": name,
            "namespace": "shop",
            "replicas": replicas,
            "requests": {"cpu": cpu, "memory": "1Gi"},
            "schedulerName": "koord-scheduler",
            "placement": placement,
            "terminationGracePeriodSeconds": 1,
            **extra,
        }

    spread = {
        "maxSkew": 1,
        "topologyKey": ZONE,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "front"}},
    }
    return {
        "name": f"skewed-{nodes}",
        "priorityClasses": [{"name": "web", "value": 1000}],
        "nodes": [
            {"name": "hot-{i}", "count": hot, "capacity": capacity, "labels": {ZONE: "a"}},
            {"name": "b-{i}", "count": zone_b, "capacity": capacity, "labels": {ZONE: "b"}},
            {"name": "c-{i}", "count": zone_c, "capacity": capacity, "labels": {ZONE: "c"}},
        ],
        "workloads": [
            deployment(
                "web",
                5 * hot,
                "1",
                placement=hot_names,
                priorityClassName="web",
                pdb={"maxUnavailable": "20%"},
            ),
            {
                **deployment("db", hot, "1500m", placement=hot_names, nodeSelector={ZONE: "a"}),
                "kind": "StatefulSet",
            },
            deployment(
                "cache", (zone_c + 1) // 2, "100m", placement=[f"c-{i}" for i in range(1, zone_c + 1, 2)]
            ),
            deployment(
                "front",
                6,
                "500m",
                placement=[f"b-{1 + i % max(1, zone_b)}" for i in range(6)],
                topologySpreadConstraints=[spread],
            ),
        ],
    }


BUILTIN["fragmented"] = fragmented()
BUILTIN["rebalance"] = skewed()
BUILTIN["maintenance"] = maintenance()
BUILTIN["small"] = {
    "name": "small",
    "nodes": [{"name": "node-{i}", "count": 3, "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"}}],
    "workloads": [
        {
            "kind": "Deployment",
            "name": "web",
            "replicas": 3,
            "requests": {"cpu": "500m"},
            "schedulerName": "koord-scheduler",
            "pdb": {"minAvailable": 2},
        }
    ],
}
