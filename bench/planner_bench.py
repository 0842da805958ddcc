"""Planning time for each rebalancing policy on a large cluster, in memory (no API server).

    python -m bench.planner_bench [--nodes 5000] [--pods 100000] [--seed 1]

The cluster: nodes in three zones, pods of Deployments (some with a zone spread constraint, some with
hostname anti-affinity) placed skewed, a third of the nodes hot, a third nearly empty. Reading the objects
into the snapshot is timed apart from each policy's planning (the target: planning ≤ 5 s per policy).
Prints one JSON document (bench/results/planner.json).
"""

from __future__ import annotations

import argparse
import random
import time
from typing import Any

from bench.results_io import emit
from shared.fit.cluster import Cluster
from shared.fit.views import node_view
from shared.rebalance import policies
from shared.rebalance.candidates import candidate
from shared.rebalance.planning import Caps, Planning

ZONE = "topology.kubernetes.io/zone"


def cluster_objects(nodes: int, pods: int, seed: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rng = random.Random(seed)
    node_objs = [
        {
            "metadata": {"name": f"n{i}", "labels": {ZONE: "abc"[i % 3], "kubernetes.io/hostname": f"n{i}"}},
            "spec": {},
            "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"}},
        }
        for i in range(nodes)
    ]
    hot, cold = nodes // 3, 2 * nodes // 3
    pod_objs = []
    for i in range(pods):
        app = f"app-{i % 2000}"
        where = (
            rng.randrange(hot)
            if rng.random() < 0.6
            else rng.randrange(hot, cold)
            if rng.random() < 0.9
            else rng.randrange(cold, nodes)
        )
        spec: dict[str, Any] = {
            "nodeName": f"n{where}",
            "containers": [
                {"name": "c", "image": "i", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}
            ],
        }
        if i % 50 == 0:
            spec["topologySpreadConstraints"] = [
                {
                    "maxSkew": 1,
                    "topologyKey": ZONE,
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": app}},
                }
            ]
        if i % 200 == 0:
            term = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "kubernetes.io/hostname"}
            spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
        meta = {
            "name": f"{app}-{i}",
            "namespace": f"ns-{i % 40}",
            "labels": {"app": app},
            "ownerReferences": [{"kind": "ReplicaSet", "name": app, "controller": True}],
        }
        pod_objs.append({"metadata": meta, "spec": spec})
    return node_objs, pod_objs


def run(nodes: int, pods: int, seed: int) -> dict[str, Any]:
    node_objs, pod_objs = cluster_objects(nodes, pods, seed)
    results: dict[str, Any] = {"nodes": nodes, "pods": pods}
    for name in ("LowNodeUtilization", "HighNodeUtilization", "RemovePodsViolatingTopologySpreadConstraint"):
        started = time.perf_counter()
        candidates = [candidate(p) for p in pod_objs]
        cluster = Cluster.of([node_view(n) for n in node_objs], [c.view for c in candidates])
        planning = Planning.of(cluster, candidates, caps=Caps(total=5000))
        read = time.perf_counter() - started
        started = time.perf_counter()
        if name == "LowNodeUtilization":
            thresholds = {"cpu": 20.0, "memory": 20.0, "pods": 20.0}
            targets = {"cpu": 50.0, "memory": 50.0, "pods": 50.0}
            measure = policies.low_node_utilization(
                planning, thresholds=thresholds, target_thresholds=targets
            )
        elif name == "HighNodeUtilization":
            measure = policies.high_node_utilization(
                planning, thresholds={"cpu": 10.0, "memory": 10.0, "pods": 10.0}
            )
        else:
            measure = policies.spread_repair(planning)
        planned = time.perf_counter() - started
        results[name] = {
            "snapshot_s": round(read, 2),
            "planning_s": round(planned, 2),
            "moves": len(planning.moves),
            "measure": {"name": measure.name, "before": measure.before, "after": measure.after},
        }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    emit("planner", run(args.nodes, args.pods, args.seed))


if __name__ == "__main__":
    main()
