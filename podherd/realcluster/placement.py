"""A scenario's `placement` on the real engine: while the scenario's nodes are cordoned, so that the
scheduler can place none of them, the placed workloads are made whole; their controllers make the pods as
they always do, and each pod is bound (the `binding` subresource, as a scheduler binds) to the node its
`placement` names. Then the nodes are opened.

The scheduler is not asked: a scenario may hold what it would no longer allow (a spread constraint violated
since its nodes came, the state rebalancing repairs), as kubesim's loader places it."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from shared.kube.client import KubeClient, KubeError

Obj = dict[str, Any]
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"


class Placer:
    def __init__(self, kube: KubeClient, nodes: list[str], deadline: float) -> None:
        self.kube, self.nodes, self.deadline = kube, nodes, deadline

    def __enter__(self) -> Placer:
        for node in self.nodes:
            self._cordon(node, True)
        return self

    def __exit__(self, *exc: object) -> None:
        for node in self.nodes:
            self._cordon(node, False)
        # The node lifecycle controller lifts the `unschedulable` taint it put on a cordoned node a moment
        # later: until then the scheduler (and Podherd's planner) keep off the node.
        while any(self._tainted(node) for node in self.nodes):
            self._wait()

    def _tainted(self, node: str) -> bool:
        try:
            found: Obj = json.loads(self.kube.request("GET", f"/api/v1/nodes/{node}"))
        except KubeError as exc:
            if exc.status == 404:
                return False
            raise
        taints = (found.get("spec") or {}).get("taints") or []
        return any(t.get("key") == UNSCHEDULABLE_TAINT for t in taints)

    def place(self, workload: Obj, create: Callable[[Obj], None], targets: list[str]) -> None:
        """Make `workload` and bind its pods, the i-th made to `targets[i]` (cycled). A StatefulSet makes
        its pods in order, each once the one before is Ready: each is bound as it comes."""
        create(workload)
        replicas = int(workload["spec"]["replicas"])
        bound: set[str] = set()
        while len(bound) < replicas:
            waiting = sorted(
                (p for p in self._pods(workload) if p["metadata"]["name"] not in bound),
                key=_made_order,
            )
            for pod in waiting:
                self._bind(pod, targets[len(bound) % len(targets)])
                bound.add(pod["metadata"]["name"])
            if len(bound) < replicas:
                self._wait()

    def _pods(self, workload: Obj) -> list[Obj]:
        selector = ",".join(f"{k}={v}" for k, v in workload["spec"]["selector"]["matchLabels"].items())
        path = f"/api/v1/namespaces/{workload['metadata']['namespace']}/pods"
        listed: Obj = json.loads(self.kube.request("GET", path, (("labelSelector", selector),)))
        return [p for p in listed["items"] if not p["spec"].get("nodeName")]

    def _bind(self, pod: Obj, node: str) -> None:
        meta = pod["metadata"]
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": meta["name"], "uid": meta["uid"]},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/binding"
        self.kube.request("POST", path, body=body, content_type="application/json")

    def _cordon(self, node: str, cordoned: bool) -> None:
        body = {"spec": {"unschedulable": cordoned or None}}
        try:
            self.kube.request(
                "PATCH", f"/api/v1/nodes/{node}", body=body, content_type="application/merge-patch+json"
            )
        except KubeError as exc:
            if exc.status != 404:
                raise

    def _wait(self) -> None:
        if time.monotonic() > self.deadline:
            raise TimeoutError("the scenario's placement: its workloads' pods were not made in time")
        time.sleep(0.05)


def _made_order(pod: Obj) -> tuple[int, str, str]:
    """A StatefulSet's pods by ordinal, others as they were made."""
    index = (pod["metadata"].get("labels") or {}).get("apps.kubernetes.io/pod-index")
    return (
        int(index) if index is not None else 0,
        pod["metadata"]["creationTimestamp"],
        pod["metadata"]["name"],
    )
