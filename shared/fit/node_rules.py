"""kube-scheduler's filters that read one node: NodeUnschedulable, NodeName, TaintToleration, NodeAffinity,
NodeResourcesFit, VolumeBinding (bound claims) and VolumeZone, in the default profile's order, each in its
plugin's own words. Each returns its reasons (several for NodeResourcesFit, which names every resource the
node lacks); an empty tuple passes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from shared.fit.views import UNSCHEDULABLE_TAINT, NodeView, Obj, PodView, Taint, VolumeView

UNSCHEDULABLE = "node(s) were unschedulable"
NODE_NAME = "node(s) didn't match the requested node name"
NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
VOLUME_NODE_CONFLICT = "node(s) had volume node affinity conflict"
VOLUME_ZONE_CONFLICT = "node(s) had no available volume zone"
FILTERED_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
NONE: tuple[str, ...] = ()


def unschedulable(pod: PodView, node: NodeView) -> tuple[str, ...]:
    cordon = Taint(UNSCHEDULABLE_TAINT, "", "NoSchedule")
    if node.unschedulable and not any(tolerates(t, cordon) for t in pod.tolerations):
        return (UNSCHEDULABLE,)
    return NONE


def node_name(wanted: str | None, node: NodeView) -> tuple[str, ...]:
    return (NODE_NAME,) if wanted and wanted != node.name else NONE


def taints(pod: PodView, node: NodeView) -> tuple[str, ...]:
    for taint in node.taints:
        if taint.effect in FILTERED_EFFECTS and not any(tolerates(t, taint) for t in pod.tolerations):
            return (f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}",)
    return NONE


def tolerates(toleration: Obj, taint: Taint) -> bool:
    """A toleration matches a taint: the same effect (or none named), and the same key with `Exists`
    (or no key: every taint) or the same key and value with `Equal`, the default."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.effect:
        return False
    key = toleration.get("key") or ""
    if toleration.get("operator") == "Exists":
        return not key or key == taint.key
    return key == taint.key and (toleration.get("value") or "") == taint.value


def node_affinity(pod: PodView, node: NodeView) -> tuple[str, ...]:
    if any(node.labels.get(k) != v for k, v in pod.node_selector.items()):
        return (NODE_AFFINITY,)
    if pod.node_terms is not None and not selects(pod.node_terms, node):
        return (NODE_AFFINITY,)
    return NONE


def selects(terms: Iterable[Obj], node: NodeView) -> bool:
    """Node selector terms: any term, each term all of its requirements; a term with none selects nothing."""
    for term in terms:
        exprs, fields = term.get("matchExpressions") or (), term.get("matchFields") or ()
        if not exprs and not fields:
            continue
        if all(_requirement(e, node.labels.get(e.get("key", ""))) for e in exprs) and all(
            _requirement(f, node.name if f.get("key") == "metadata.name" else None) for f in fields
        ):
            return True
    return False


def _requirement(expr: Obj, value: str | None) -> bool:
    op, values = expr.get("operator"), list(expr.get("values") or ())
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and len(values) == 1:
        try:
            have, bound = int(value), int(values[0])
        except ValueError:
            return False
        return have > bound if op == "Gt" else have < bound
    return False


def resources(
    pod: PodView, node: NodeView, *, used: Mapping[str, int], count: int, bonus: Mapping[str, int]
) -> tuple[str, ...]:
    """NodeResourcesFit: one more pod than the node allows; then each requested resource (cpu, memory,
    ephemeral-storage, then extended ones) above what the node has left, Reservation room for the pod
    counted as left. Every shortfall is a reason of its own."""
    reasons = []
    if (count + 1) * 1000 > node.allocatable.get("pods", 0):
        reasons.append("Too many pods")
    for name in _resource_order(pod.requests):
        want = pod.requests[name]
        left = node.allocatable.get(name, 0) - used.get(name, 0) + bonus.get(name, 0)
        if want > 0 and want > left:
            reasons.append(f"Insufficient {name}")
    return tuple(reasons)


def _resource_order(requests: Mapping[str, int]) -> list[str]:
    first = [r for r in ("cpu", "memory", "ephemeral-storage") if r in requests]
    return first + sorted(r for r in requests if r not in first and r != "pods")


def volumes(pod: PodView, node: NodeView, bound: Mapping[str, VolumeView]) -> tuple[str, ...]:
    """VolumeBinding for claims already bound (each volume's required node affinity), then VolumeZone
    (each volume's zone and region labels, values joined by `__`, hold the node's)."""
    mine = [bound[f"{pod.namespace}/{claim}"] for claim in pod.claims if f"{pod.namespace}/{claim}" in bound]
    if any(v.node_terms is not None and not selects(v.node_terms, node) for v in mine):
        return (VOLUME_NODE_CONFLICT,)
    for volume in mine:
        if any(node.labels.get(key) not in values for key, values in volume.zones.items()):
            return (VOLUME_ZONE_CONFLICT,)
    return NONE
