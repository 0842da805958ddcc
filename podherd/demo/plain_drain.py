"""kubectl drain's algorithm, written in Python (k8s.io/kubectl/pkg/drain), for the maintenance demo to show
what a plain drain does to a cluster: no kubectl is needed.

Cordon the node; list its pods; leave DaemonSet and mirror pods (`--ignore-daemonsets`); evict every other
pod at once, each retrying every 5 seconds while a PodDisruptionBudget refuses it (429), until the timeout;
then wait for the evicted pods to be gone. Nothing reserves room for the replacements, and nothing waits for
one to be Ready before the next pod goes: whatever the budgets allow goes at once.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import kubernetes

RETRY_EVERY = 5.0  # kubectl drain: the wait after an eviction refused with 429


@dataclass
class PlainDrainResult:
    evicted: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)  # pod -> the last refusal, when it gave up
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"evicted": len(self.evicted), "gave_up_on": self.refused, "seconds": round(self.seconds, 1)}


def _stays(pod: Any) -> bool:
    owners = pod.metadata.owner_references or []
    mirror = "kubernetes.io/config.mirror" in (pod.metadata.annotations or {})
    return mirror or any(o.kind == "DaemonSet" for o in owners) or pod.status.phase in ("Succeeded", "Failed")


def _evict(core: Any, pod: Any, deadline: float) -> tuple[str, str | None]:
    """Evict one pod, retrying while a budget refuses; (pod, None) once evicted, else the last refusal."""
    name, namespace = pod.metadata.name, pod.metadata.namespace
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}
    while True:
        try:
            core.create_namespaced_pod_eviction(name, namespace, body)
            return f"{namespace}/{name}", None
        except kubernetes.client.ApiException as exc:
            if exc.status == 404:
                return f"{namespace}/{name}", None
            if exc.status != 429 or time.monotonic() + RETRY_EVERY > deadline:
                return f"{namespace}/{name}", f"{exc.status} {exc.reason}"
            time.sleep(RETRY_EVERY)


def plain_drain(core: Any, node: str, *, timeout: float) -> PlainDrainResult:
    started = time.monotonic()
    deadline = started + timeout
    core.patch_node(node, {"spec": {"unschedulable": True}})
    pods = [
        p
        for p in core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items
        if not _stays(p)
    ]
    result = PlainDrainResult()
    with ThreadPoolExecutor(max_workers=max(1, len(pods))) as pool:
        for key, refusal in pool.map(lambda p: _evict(core, p, deadline), pods):
            if refusal is None:
                result.evicted.append(key)
            else:
                result.refused[key] = refusal
    while time.monotonic() < deadline:  # waitForDelete: the evicted pods gone
        left = {
            f"{p.metadata.namespace}/{p.metadata.name}"
            for p in core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items
        }
        if not left & set(result.evicted):
            break
        time.sleep(0.2)
    result.seconds = time.monotonic() - started
    return result
