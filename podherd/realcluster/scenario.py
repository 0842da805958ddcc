"""A scenario made on the real engine through its API, then waited for: every node Ready (kwok), every
workload's replicas Ready (kube-controller-manager, the scheduler, kwok), every pod given a node Ready."""

from __future__ import annotations

import functools
import json
import time
from typing import Any

from podherd.realcluster.placement import Placer
from podherd.realcluster.scenario_objects import Obj, Objects, objects
from shared.api import paths
from shared.kube.client import KubeClient, KubeError

_PATHS = {
    "Namespace": paths.NAMESPACES,
    "PriorityClass": "/apis/scheduling.k8s.io/v1/priorityclasses",
    "Node": paths.NODES,
    "Deployment": "/apis/apps/v1/namespaces/{namespace}/deployments",
    "StatefulSet": "/apis/apps/v1/namespaces/{namespace}/statefulsets",
    "PodDisruptionBudget": "/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets",
    "Pod": "/api/v1/namespaces/{namespace}/pods",
}


def create(kube: KubeClient, obj: Obj) -> None:
    """Create `obj`; one that exists already is left as it is."""
    path = _PATHS[obj["kind"]].format(namespace=obj["metadata"].get("namespace", ""))
    try:
        kube.request("POST", path, body=obj, content_type="application/json")
    except KubeError as exc:
        if exc.status != 409:
            raise


def load(kube: KubeClient, document: dict[str, Any], timeout: float = 120.0) -> Objects:
    made = objects(document)
    for namespace in made.namespaces:
        create(kube, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    deadline = time.monotonic() + timeout
    for namespace in made.namespaces:  # pods can be made there once its ServiceAccount is
        _until(deadline, f"the default ServiceAccount of {namespace}", lambda n=namespace: _account(kube, n))
    for obj in (*made.priority_classes, *made.nodes):
        create(kube, obj)
    for name in [n["metadata"]["name"] for n in made.nodes if n["metadata"]["annotations"]]:
        _until(deadline, f"node {name} Ready", lambda name=name: _node_ready(kube, name))
    placed = [w for w in made.workloads if _key(w) in made.placement]
    if placed:
        with Placer(kube, [n["metadata"]["name"] for n in made.nodes], deadline) as placer:
            for workload in placed:
                placer.place(workload, functools.partial(create, kube), made.placement[_key(workload)])
    for obj in (*(w for w in made.workloads if w not in placed), *made.budgets, *made.pods):
        create(kube, obj)
    for workload in made.workloads:
        _until(
            deadline,
            f"{workload['kind']} {workload['metadata']['name']} ready",
            lambda w=workload: _ready(kube, w),
        )
    for pod in made.pods:
        if pod["spec"].get("nodeName"):
            _until(deadline, f"pod {pod['metadata']['name']} Ready", lambda p=pod: _pod_ready(kube, p))
    return made


def _key(workload: Obj) -> tuple[str, str]:
    return workload["metadata"]["namespace"], workload["metadata"]["name"]


def _until(deadline: float, what: str, holds: Any) -> None:
    while not holds():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the scenario's {what}: not within the timeout")
        time.sleep(0.1)


def _get(kube: KubeClient, path: str) -> Obj | None:
    try:
        found: Obj = json.loads(kube.request("GET", path))
        return found
    except KubeError as exc:
        if exc.status == 404:
            return None
        raise


def _account(kube: KubeClient, namespace: str) -> bool:
    return _get(kube, f"/api/v1/namespaces/{namespace}/serviceaccounts/default") is not None


def _true(obj: Obj | None, condition: str) -> bool:
    conditions = ((obj or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == condition and c.get("status") == "True" for c in conditions)


NOT_READY_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


def _node_ready(kube: KubeClient, name: str) -> bool:
    """Ready, and schedulable as such: the node lifecycle controller has lifted the taint a new node gets."""
    node = _get(kube, f"{paths.NODES}/{name}")
    taints = ((node or {}).get("spec") or {}).get("taints") or []
    return _true(node, "Ready") and not any(t.get("key") in NOT_READY_TAINTS for t in taints)


def _pod_ready(kube: KubeClient, pod: Obj) -> bool:
    meta = pod["metadata"]
    return _true(_get(kube, f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"), "Ready")


def _ready(kube: KubeClient, workload: Obj) -> bool:
    meta = workload["metadata"]
    path = _PATHS[workload["kind"]].format(namespace=meta["namespace"]) + f"/{meta['name']}"
    found = _get(kube, path) or {}
    status = found.get("status") or {}
    wanted = int(workload["spec"]["replicas"])
    return int(status.get("readyReplicas") or 0) == wanted and int(status.get("replicas") or 0) == wanted
