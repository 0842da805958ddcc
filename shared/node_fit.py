"""Whether a pod (or a Reservation's template) fits a node, and how well: the scheduler's filters and
score, pure over the node object (its JSON), its usage and the pod spec. kubesim's scheduler places pods with
it; Podherd's arbitrator and planner are to ask it whether a pod fits another node.

Filters: resource requests against allocatable minus what is in use; nodeSelector; required node affinity
(matchExpressions and matchFields); taints and tolerations, with cordoned and NotReady nodes tainted as the
node lifecycle controller taints them. Score: least- or most-allocated (lower is better). `elsewhere` is the
descheduler's NodeFit, which Koordinator's `nodeFit` applies: whether a pod would fit another node.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from shared.quantity import milli, pod_requests
from shared.selectors import matches_selector_dict

Obj = dict[str, Any]

Usage = dict[str, int]

AFFINITY_MISMATCH = "node(s) didn't match Pod's node affinity/selector"
ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
UNSCHEDULABLE = "node(s) were unschedulable"
TERMINAL = ("Succeeded", "Failed")


def add_usage(target: Usage, delta: Mapping[str, int], sign: int) -> None:
    for name, value in delta.items():
        target[name] = target.get(name, 0) + sign * value


def allocatable(node: Obj) -> Usage:
    status = node.get("status") or {}
    values = status.get("allocatable") or status.get("capacity") or {}
    return {k: milli(v) for k, v in values.items()}


def insufficient(node: Obj, used: Usage, requests: Usage, *, bonus: Usage | None = None) -> str | None:
    """The first resource the node lacks for `requests` (with `bonus` room of a Reservation), if any."""
    free_of = allocatable(node)
    for name, value in requests.items():
        if value <= 0:
            continue
        free = free_of.get(name, 0) - used.get(name, 0) + (bonus or {}).get(name, 0)
        if value > free:
            return "Too many pods" if name == "pods" else f"Insufficient {name}"
    return None


def score(node: Obj, used: Usage, requests: Usage, *, policy: str) -> float:
    """Lower is better: least-allocated prefers empty nodes, most-allocated full ones."""
    free_of = allocatable(node)
    fractions = [
        (used.get(r, 0) + requests.get(r, 0)) / free_of[r] for r in ("cpu", "memory") if free_of.get(r)
    ]
    fill = sum(fractions) / len(fractions) if fractions else 0.0
    return fill if policy == "least-allocated" else -fill


def reject(spec: Obj, node: Obj) -> str | None:
    """Why the node is not for this pod spec, apart from room: selector, affinity or an untolerated taint."""
    labels = node["metadata"].get("labels") or {}
    if any(labels.get(key) != value for key, value in (spec.get("nodeSelector") or {}).items()):
        return AFFINITY_MISMATCH
    affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = (affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms")
    if required and not matches_terms(required, node):
        return AFFINITY_MISMATCH
    tolerations = spec.get("tolerations") or []
    for taint in node_taints(node):
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not any(
            tolerates(t, taint) for t in tolerations
        ):
            if taint["key"] == "node.kubernetes.io/unschedulable":
                return UNSCHEDULABLE
            if taint["key"] == "node.kubernetes.io/not-ready":
                return "node(s) had untolerated taint {node.kubernetes.io/not-ready: }"
            return f"node(s) had untolerated taint {{{taint['key']}: {taint.get('value', '')}}}"
    return None


def elsewhere(pod: Obj, node: Obj, pods_on_node: Iterable[Obj]) -> str | None:
    """Why `pod` would not fit `node`, another node than its own, by the descheduler's NodeFit: the node
    cordoned; its labels against the pod's selector and required affinity; a NoSchedule or NoExecute taint
    the pod does not tolerate; a pod there that the pod's required anti-affinity rules out; too little room
    left by the pods there (those not yet ended) for the pod's requests. None: it fits."""
    spec = pod.get("spec") or {}
    if (node.get("spec") or {}).get("unschedulable"):
        return UNSCHEDULABLE
    rejected = reject(spec, node)
    if rejected is not None:
        return rejected
    present = [p for p in pods_on_node if (p.get("status") or {}).get("phase") not in TERMINAL]
    if _anti_affinity_conflict(pod, node, present):
        return ANTI_AFFINITY
    used: Usage = {}
    for other in present:
        add_usage(used, pod_requests(other.get("spec") or {}), 1)
    return insufficient(node, used, pod_requests(spec))


def _anti_affinity_conflict(pod: Obj, node: Obj, others: Iterable[Obj]) -> bool:
    """A pod on `node` matches one of `pod`'s required anti-affinity terms whose topology key the node has."""
    meta = pod.get("metadata") or {}
    anti = ((pod.get("spec") or {}).get("affinity") or {}).get("podAntiAffinity") or {}
    labels = node["metadata"].get("labels") or {}
    for term in anti.get("requiredDuringSchedulingIgnoredDuringExecution") or []:
        if term.get("topologyKey") not in labels:
            continue
        namespaces = set(term.get("namespaces") or [meta.get("namespace")])
        for other in others:
            theirs = other.get("metadata") or {}
            if theirs.get("name") == meta.get("name") or theirs.get("namespace") not in namespaces:
                continue
            if matches_selector_dict(term.get("labelSelector"), theirs.get("labels") or {}):
                return True
    return False


def node_taints(node: Obj) -> list[Obj]:
    """The node's taints, with those the node lifecycle controller adds for cordoned and NotReady nodes."""
    taints = list((node.get("spec") or {}).get("taints") or [])
    if (node.get("spec") or {}).get("unschedulable"):
        taints.append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"})
    if not node_ready(node):
        taints.append({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"})
    return taints


def node_ready(node: Obj) -> bool:
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True")
    return True


def unavailable_message(reasons: Mapping[str, int], total: int) -> str:
    parts = ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items()))
    return f"0/{total} nodes are available: {parts}." if parts else f"0/{total} nodes are available."


def matches_terms(terms: Iterable[Obj], node: Obj) -> bool:
    """Whether the node matches any of these node selector terms (terms are OR-ed, a term's expressions
    AND-ed; an empty term matches nothing)."""
    return any(_term_matches(term, node) for term in terms)


def _term_matches(term: Obj, node: Obj) -> bool:
    labels = node["metadata"].get("labels") or {}
    for expr in term.get("matchExpressions") or []:
        if not _expr_matches(expr, labels.get(expr["key"]), expr["key"] in labels):
            return False
    for expr in term.get("matchFields") or []:
        value = node["metadata"]["name"] if expr["key"] == "metadata.name" else None
        if not _expr_matches(expr, value, value is not None):
            return False
    return bool(term.get("matchExpressions") or term.get("matchFields"))


def _expr_matches(expr: Obj, value: str | None, present: bool) -> bool:
    op, values = expr.get("operator"), expr.get("values") or []
    if op == "In":
        return present and value in values
    if op == "NotIn":
        return not present or value not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and value is not None and values:
        try:
            return int(value) > int(values[0]) if op == "Gt" else int(value) < int(values[0])
        except ValueError:
            return False
    return False


def tolerates(toleration: Obj, taint: Obj) -> bool:
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("operator") == "Exists":
        return not toleration.get("key") or toleration["key"] == taint["key"]
    return bool(
        toleration.get("key") == taint["key"] and toleration.get("value", "") == taint.get("value", "")
    )
