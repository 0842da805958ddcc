"""Whether a pod (or a Reservation's template) fits a node, and how well: kubesim's scheduler's node filters
and score, pure over the node object (its JSON), its usage and the pod spec. Podherd's own fit library
(`shared.fit`) is written apart from it, so that each checks the other.

Filters: resource requests against allocatable minus what is in use; nodeSelector; required node affinity
(matchExpressions and matchFields); taints and tolerations, with cordoned and NotReady nodes tainted as the
node lifecycle controller taints them. Score: least- or most-allocated (lower is better).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from shared.api.quantity import milli

Obj = dict[str, Any]

Usage = dict[str, int]

AFFINITY_MISMATCH = "node(s) didn't match Pod's node affinity/selector"
UNSCHEDULABLE = "node(s) were unschedulable"


def add_usage(target: Usage, delta: Mapping[str, int], sign: int) -> None:
    for name, value in delta.items():
        target[name] = target.get(name, 0) + sign * value


def allocatable(node: Obj) -> Usage:
    status = node.get("status") or {}
    values = status.get("allocatable") or status.get("capacity") or {}
    return {k: milli(v) for k, v in values.items()}


def insufficient(node: Obj, used: Usage, requests: Usage, *, bonus: Usage | None = None) -> tuple[str, ...]:
    """Every resource the node lacks for `requests` (with `bonus` room of a Reservation), as
    NodeResourcesFit names them: the pod count first, then cpu, memory, ephemeral-storage, then the rest."""
    free_of = allocatable(node)
    short = []
    for name in sorted(requests, key=lambda r: (_ORDER.get(r, len(_ORDER)), r)):
        value = requests[name]
        free = free_of.get(name, 0) - used.get(name, 0) + (bonus or {}).get(name, 0)
        if value > 0 and value > free:
            short.append("Too many pods" if name == "pods" else f"Insufficient {name}")
    return tuple(short)


_ORDER = {"pods": 0, "cpu": 1, "memory": 2, "ephemeral-storage": 3}


def score(node: Obj, used: Usage, requests: Usage, *, policy: str) -> float:
    """Lower is better: least-allocated prefers empty nodes, most-allocated full ones."""
    free_of = allocatable(node)
    fractions = [
        (used.get(r, 0) + requests.get(r, 0)) / free_of[r] for r in ("cpu", "memory") if free_of.get(r)
    ]
    fill = sum(fractions) / len(fractions) if fractions else 0.0
    return fill if policy == "least-allocated" else -fill


def reject(spec: Obj, node: Obj) -> str | None:
    """Why the node is not for this pod spec, apart from room, in kube-scheduler's filter order: cordoned
    (NodeUnschedulable), an untolerated taint (TaintToleration), then its selector or required affinity."""
    tolerations = spec.get("tolerations") or []
    for taint in node_taints(node):
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not any(
            tolerates(t, taint) for t in tolerations
        ):
            if taint["key"] == "node.kubernetes.io/unschedulable":
                return UNSCHEDULABLE
            return f"node(s) had untolerated taint {{{taint['key']}: {taint.get('value', '')}}}"
    labels = node["metadata"].get("labels") or {}
    if any(labels.get(key) != value for key, value in (spec.get("nodeSelector") or {}).items()):
        return AFFINITY_MISMATCH
    affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = (affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms")
    if required is not None and not matches_terms(required, node):
        return AFFINITY_MISMATCH
    return None


def node_taints(node: Obj) -> list[Obj]:
    """The node's taints: the cordon's first (NodeUnschedulable runs before TaintToleration), then its own,
    then the one the node lifecycle controller adds when Ready is False (not-ready) or Unknown
    (unreachable)."""
    spec = node.get("spec") or {}
    taints = list(spec.get("taints") or [])
    keys = {t.get("key") for t in taints}
    if spec.get("unschedulable"):
        taints.insert(0, {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"})
    lifecycle = {"False": "node.kubernetes.io/not-ready", "Unknown": "node.kubernetes.io/unreachable"}.get(
        _ready_status(node)
    )
    if lifecycle is not None and lifecycle not in keys:
        taints.append({"key": lifecycle, "effect": "NoSchedule"})
    return taints


def _ready_status(node: Obj) -> str:
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return str(condition.get("status"))
    return "True"


def node_ready(node: Obj) -> bool:
    return _ready_status(node) == "True"


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
