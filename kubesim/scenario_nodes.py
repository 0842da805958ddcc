"""A scenario's nodes: made as the document says (groups of `count`, capacity, labels, taints, ready), and
the loader's placement of its pods on them (the wanted node, else round-robin over those that fit, which
spreads pods as least-allocated scoring would)."""

from __future__ import annotations

from typing import Any

from kubesim.apiserver.admission import NODE_INFO
from kubesim.apiserver.records import now_iso
from kubesim.apiserver.resources import ResourceType
from kubesim.apiserver.store import Store
from shared.api.quantity import milli


class NodePlacer:
    def __init__(self, store: Store, rt: ResourceType) -> None:
        self.store, self.rt = store, rt
        self.free: dict[str, dict[str, int]] = {}
        self.node_order: list[str] = []
        self.cursor = 0

    def add(self, groups: list[dict[str, Any]]) -> None:
        for group in groups:
            count = int(group.get("count", 1))
            for i in range(1, count + 1):
                name = str(group["name"]).format(i=i)
                capacity = {"cpu": "4", "memory": "16Gi", "pods": "110", **(group.get("capacity") or {})}
                labels = {
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    **(group.get("labels") or {}),
                }
                spec: dict[str, Any] = {}
                if group.get("taints"):
                    spec["taints"] = group["taints"]
                ready = "True" if group.get("ready", True) else "False"
                self.store.put(
                    self.rt,
                    {
                        "metadata": {
                            "name": name,
                            "uid": f"node-{name}",
                            "labels": labels,
                            "creationTimestamp": now_iso(),
                            "generation": 1,
                        },
                        "spec": spec,
                        "status": {
                            "capacity": capacity,
                            "allocatable": dict(capacity),
                            "conditions": [{"type": "Ready", "status": ready, "reason": "KubeletReady"}],
                            "nodeInfo": dict(NODE_INFO),
                        },
                    },
                    "ADDED",
                )
                self.free[name] = {k: milli(v) for k, v in capacity.items()}
                self.node_order.append(name)

    def place(self, requests: dict[str, int], wanted: str | None) -> str | None:
        """The wanted node, else the next node round-robin that fits (spreads like least-allocated)."""
        count = len(self.node_order)
        start = self.cursor
        self.cursor = (self.cursor + 1) % max(count, 1)
        candidates = (
            (self.node_order[(start + i) % count] for i in range(count)) if not wanted else iter([wanted])
        )
        for node in candidates:
            free = self.free.get(node)
            if free is not None and all(free.get(k, 0) >= v for k, v in requests.items() if v > 0):
                for k, v in requests.items():
                    free[k] = free.get(k, 0) - v
                return node
        return None
