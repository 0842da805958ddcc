"""A policy run as the descheduler runs it, for comparison: pick the pods by the plugin's rules, evict them,
reserve nothing, and let the scheduler place their replacements wherever it will.

The rules are the descheduler's with its defaults (`nodeFit` off in the DefaultEvictor): pods with a
controller that is not a DaemonSet, not terminating, lowest priority first.

- LowNodeUtilization: from each overutilized node, most used first, until it is back under its
  targetThresholds, while the underutilized nodes still have room up to their targetThresholds in total.
- HighNodeUtilization: every pod of each underutilized node, least used first, while the other nodes have
  room for it in total.

What a run leaves is then counted: replacements stranded (Pending for lack of room), and moves undone
(a replacement placed back where the policy took pods from: an overutilized node, or a node it emptied).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import kubernetes

from shared.api.quantity import milli, pod_requests

Obj = dict[str, Any]
RESOURCES = ("cpu", "memory", "pods")


@dataclass
class Usage:
    allocatable: dict[str, dict[str, int]]
    used: dict[str, dict[str, int]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(int)))

    @classmethod
    def of(cls, nodes: Sequence[Obj], pods: Sequence[Obj]) -> Usage:
        usage = cls({n["metadata"]["name"]: _allocatable(n) for n in nodes})
        for pod in pods:
            where = (pod.get("spec") or {}).get("nodeName")
            if where in usage.allocatable and (pod.get("status") or {}).get("phase") not in (
                "Succeeded",
                "Failed",
            ):
                for name, value in pod_requests(pod.get("spec") or {}).items():
                    usage.used[where][name] += value
        return usage

    def percent(self, node: str) -> dict[str, float]:
        have = self.allocatable[node]
        return {r: 100.0 * self.used[node][r] / have[r] for r in RESOURCES if have.get(r)}

    def take(self, node: str, pod: Obj, sign: int = -1) -> None:
        for name, value in pod_requests(pod.get("spec") or {}).items():
            self.used[node][name] += sign * value


def _allocatable(node: Obj) -> dict[str, int]:
    values = (node.get("status") or {}).get("allocatable") or {}
    return {k: milli(v) for k, v in values.items()}


def evictable(pod: Obj) -> bool:
    meta = pod.get("metadata") or {}
    owner = next((o for o in meta.get("ownerReferences") or () if o.get("controller")), None)
    return owner is not None and owner.get("kind") != "DaemonSet" and not meta.get("deletionTimestamp")


def _by_priority(pods: Sequence[Obj]) -> list[Obj]:
    return sorted(
        pods, key=lambda p: (int((p.get("spec") or {}).get("priority") or 0), p["metadata"]["name"])
    )


def _on(pods: Sequence[Obj], node: str) -> list[Obj]:
    return [p for p in pods if (p.get("spec") or {}).get("nodeName") == node and evictable(p)]


def low_node_utilization(
    nodes: Sequence[Obj],
    pods: Sequence[Obj],
    *,
    thresholds: Mapping[str, float],
    targets: Mapping[str, float],
) -> tuple[list[Obj], set[str]]:
    """The pods it evicts, and the overutilized nodes it takes them from."""
    usage = Usage.of(nodes, pods)
    names = sorted(usage.allocatable)
    under = [n for n in names if all(usage.percent(n).get(r, 0) < v for r, v in thresholds.items())]
    over = [n for n in names if any(usage.percent(n).get(r, 0) > v for r, v in targets.items())]
    room = {
        r: sum(usage.allocatable[n].get(r, 0) * targets[r] / 100 - usage.used[n][r] for n in under)
        for r in targets
    }
    victims: list[Obj] = []
    for node in sorted(over, key=lambda n: -sum(usage.percent(n).values())):
        for pod in _by_priority(_on(pods, node)):
            if not any(usage.percent(node).get(r, 0) > v for r, v in targets.items()):
                break
            need = pod_requests(pod.get("spec") or {})
            if any(room[r] - need.get(r, 0) < 0 for r in room):
                return victims, set(over)
            victims.append(pod)
            usage.take(node, pod)
            for r in room:
                room[r] -= need.get(r, 0)
    return victims, set(over)


def high_node_utilization(
    nodes: Sequence[Obj], pods: Sequence[Obj], *, thresholds: Mapping[str, float]
) -> tuple[list[Obj], set[str]]:
    """The pods it evicts, and the underutilized nodes (a replacement placed on one undoes the point)."""
    usage = Usage.of(nodes, pods)
    names = sorted(usage.allocatable)
    under = [n for n in names if all(usage.percent(n).get(r, 0) < v for r, v in thresholds.items())]
    room = {
        r: sum(usage.allocatable[n].get(r, 0) - usage.used[n][r] for n in names if n not in under)
        for r in RESOURCES
    }
    victims: list[Obj] = []
    for node in sorted(under, key=lambda n: sum(usage.percent(n).values())):
        for pod in _by_priority(_on(pods, node)):  # an empty node has none
            need = pod_requests(pod.get("spec") or {})
            if any(room[r] - need.get(r, 0) < 0 for r in room):
                return victims, set(under)
            victims.append(pod)
            for r in room:
                room[r] -= need.get(r, 0)
    return victims, set(under)


@dataclass(frozen=True)
class Aftermath:
    evicted: int
    stranded: list[str]  # replacements Pending for lack of room
    undone: list[str]  # replacements placed back where the policy took pods from


def aftermath(
    victims: Sequence[Obj], pods_after: Sequence[Obj], *, sources: set[str], before: Sequence[Obj]
) -> Aftermath:
    """What the evictions left, from the pods once the cluster has settled: the pods of the evicted pods'
    workloads that were not there `before` are the replacements."""
    owners = {_owner(v) for v in victims}
    known = {p["metadata"]["uid"] for p in before}
    fresh = [
        p
        for p in pods_after
        if _owner(p) in owners
        and p["metadata"]["uid"] not in known
        and not p["metadata"].get("deletionTimestamp")
    ]
    stranded = sorted(_key(p) for p in fresh if not (p.get("spec") or {}).get("nodeName"))
    undone = sorted(
        f"{_key(p)} on {p['spec']['nodeName']}"
        for p in fresh
        if (p.get("spec") or {}).get("nodeName") in sources
    )
    return Aftermath(len(victims), stranded, undone)


def _owner(pod: Obj) -> str:
    meta = pod.get("metadata") or {}
    owner: Obj = next((o for o in meta.get("ownerReferences") or () if o.get("controller")), {})
    return f"{meta.get('namespace')}/{owner.get('kind')}/{owner.get('name')}"


def _key(pod: Obj) -> str:
    return f"{pod['metadata'].get('namespace')}/{pod['metadata']['name']}"


def objects(core: Any) -> tuple[list[Obj], list[Obj]]:
    """The nodes and pods, as plain JSON, through the official client's CoreV1Api."""
    serialize = core.api_client.sanitize_for_serialization
    return serialize(core.list_node().items), serialize(core.list_pod_for_all_namespaces().items)


def over_targets(core: Any, targets: Mapping[str, float]) -> list[str]:
    nodes, pods = objects(core)
    usage = Usage.of(nodes, pods)
    return [n for n in usage.allocatable if any(usage.percent(n).get(r, 0) > v for r, v in targets.items())]


def at_rest(core: Any, apps: Any) -> list[Obj] | None:
    """The pods once every workload has all of its, each placed or found unschedulable, none terminating (a
    StatefulSet makes a replacement only once the pod it replaces is gone); None before."""
    _, pods = objects(core)
    owned: dict[str, int] = {}
    for pod in pods:
        meta, status = pod["metadata"], pod.get("status") or {}
        unschedulable = any(c.get("reason") == "Unschedulable" for c in status.get("conditions") or ())
        if meta.get("deletionTimestamp") or not ((pod.get("spec") or {}).get("nodeName") or unschedulable):
            return None
        for ref in meta.get("ownerReferences") or ():
            owned[ref["name"]] = owned.get(ref["name"], 0) + 1
    sets = [
        *apps.list_stateful_set_for_all_namespaces().items,
        *apps.list_replica_set_for_all_namespaces().items,
    ]
    return None if any(owned.get(s.metadata.name, 0) != s.spec.replicas for s in sets) else pods


def run(
    kubeconfig: str,
    *,
    thresholds: Mapping[str, float],
    targets: Mapping[str, float],
    consolidate: Mapping[str, float],
    settle: float,
) -> dict[str, dict[str, Any]]:
    """LowNodeUtilization, then HighNodeUtilization, each run the descheduler's way on the cluster and left
    to come to rest: what each evicted, stranded and undid, and how many nodes LowNodeUtilization left over
    its targets."""
    api = kubernetes.config.new_client_from_config(config_file=kubeconfig)
    core, apps = kubernetes.client.CoreV1Api(api), kubernetes.client.AppsV1Api(api)
    found: dict[str, dict[str, Any]] = {}
    for name in ("LowNodeUtilization", "HighNodeUtilization"):
        nodes, pods = objects(core)
        if name == "LowNodeUtilization":
            victims, sources = low_node_utilization(nodes, pods, thresholds=thresholds, targets=targets)
        else:
            victims, sources = high_node_utilization(nodes, pods, thresholds=consolidate)
        for pod in victims:
            meta = pod["metadata"]
            where = kubernetes.client.V1ObjectMeta(name=meta["name"], namespace=meta["namespace"])
            core.create_namespaced_pod_eviction(
                meta["name"], meta["namespace"], kubernetes.client.V1Eviction(metadata=where)
            )
        after = _waited(lambda: at_rest(core, apps), settle)
        if after is None:
            raise TimeoutError(
                f"the cluster did not come to rest within {settle:g} s after {name}'s evictions"
            )
        result = aftermath(victims, after, sources=sources, before=pods)
        found[name] = {
            "moves": result.evicted,
            "stranded": result.stranded,
            "undone": result.undone,
            "over_targets": len(over_targets(core, targets)),
        }
    return found


def _waited(check: Any, within: float) -> list[Obj] | None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        found: list[Obj] | None = check()
        if found is not None:
            return found
        time.sleep(0.2)  # the cluster settling: many pods' states, no one event to wait on
    return None
