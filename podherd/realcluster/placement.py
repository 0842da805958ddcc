"""A scenario's `placement` on the real engine: the workload grows one replica at a time while only the node
its `placement` names for that replica is schedulable (the scenario's other nodes cordoned), so that the
scheduler itself puts each pod where the scenario says. A pod the scheduler placed before it saw the cordon
is deleted and made again by its controller."""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable
from typing import Any

from shared.kube import KubeClient, KubeError

Obj = dict[str, Any]
_WORKLOADS = {"Deployment": "deployments", "StatefulSet": "statefulsets"}


class Placer:
    def __init__(self, kube: KubeClient, nodes: list[str], deadline: float) -> None:
        self.kube, self.nodes, self.deadline = kube, nodes, deadline
        self.open: str | None = None

    def __enter__(self) -> Placer:
        for node in self.nodes:
            self._cordon(node, True)
        return self

    def __exit__(self, *exc: object) -> None:
        for node in self.nodes:
            self._cordon(node, False)

    def place(self, workload: Obj, create: Callable[[Obj], None], targets: list[str]) -> None:
        """Create `workload` with no replica, then add each on its node."""
        replicas = int(workload["spec"]["replicas"])
        empty = copy.deepcopy(workload)
        empty["spec"]["replicas"] = 0
        create(empty)
        placed: set[str] = set()
        for index in range(replicas):
            target = targets[index % len(targets)]
            self._only(target)
            self._scale(workload, index + 1)
            while not self._landed(workload, placed, target):
                self._wait()

    def _only(self, target: str) -> None:
        if self.open == target:
            return
        self._cordon(target, False)
        if self.open is not None:
            self._cordon(self.open, True)
        self.open = target

    def _cordon(self, node: str, cordoned: bool) -> None:
        self._patch(f"/api/v1/nodes/{node}", {"spec": {"unschedulable": cordoned or None}})

    def _path(self, workload: Obj) -> str:
        meta = workload["metadata"]
        return f"/apis/apps/v1/namespaces/{meta['namespace']}/{_WORKLOADS[workload['kind']]}/{meta['name']}"

    def _scale(self, workload: Obj, replicas: int) -> None:
        self._patch(self._path(workload), {"spec": {"replicas": replicas}})

    def _patch(self, path: str, body: Obj) -> None:
        self.kube.request("PATCH", path, body=body, content_type="application/merge-patch+json")

    def _pods(self, workload: Obj) -> list[Obj]:
        selector = ",".join(f"{k}={v}" for k, v in workload["spec"]["selector"]["matchLabels"].items())
        path = f"/api/v1/namespaces/{workload['metadata']['namespace']}/pods"
        listed: Obj = json.loads(self.kube.request("GET", path, (("labelSelector", selector),)))
        return [p for p in listed["items"] if not p["metadata"].get("deletionTimestamp")]

    def _landed(self, workload: Obj, placed: set[str], target: str) -> bool:
        """Whether the replica just added is bound on `target` (then counted in `placed`); one bound
        elsewhere is deleted, for its controller to make again."""
        for pod in self._pods(workload):
            uid, node = pod["metadata"]["uid"], pod["spec"].get("nodeName")
            if uid in placed or not node:
                continue
            if node == target:
                placed.add(uid)
                return True
            self._delete(workload, str(pod["metadata"]["name"]))
        return False

    def _delete(self, workload: Obj, pod: str) -> None:
        path = f"/api/v1/namespaces/{workload['metadata']['namespace']}/pods/{pod}"
        try:
            self.kube.request("DELETE", path, body={"gracePeriodSeconds": 0})
        except KubeError as exc:
            if exc.status != 404:
                raise

    def _wait(self) -> None:
        if time.monotonic() > self.deadline:
            raise TimeoutError("the scenario's placement: not within the timeout")
        time.sleep(0.05)
