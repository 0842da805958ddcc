"""kube-scheduler's scoring of the feasible nodes by what a pod prefers (its default profile's weights):
NodeAffinity's preferred terms (2), TaintToleration's `PreferNoSchedule` taints (3), InterPodAffinity's
preferred terms (2) and PodTopologySpread's `ScheduleAnyway` constraints (2), each normalized over the
nodes found to 0 to 100 as the plugin normalizes it, added to the room score (1). A pod that prefers nothing
on nodes without `PreferNoSchedule` taints is placed by room alone. Of placed pods' own preferred terms,
InterPodAffinity's symmetric part, nothing is scored."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kubesim.apiserver.records import Obj
from kubesim.controllers import node_filters, pod_topology

PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
WEIGHTS = {"NodeAffinity": 2, "TaintToleration": 3, "InterPodAffinity": 2, "PodTopologySpread": 2}
MAX_SCORE = 100


@dataclass
class Preferences:
    node_terms: list[tuple[int, list[Obj]]]  # (weight, [term]) of preferred node affinity
    tolerations: list[Obj]
    pod_terms: list[tuple[int, str, Counter[str]]]  # (±weight, topology key, its pods in each domain)
    spreads: list[tuple[str, Counter[str], float, int]]  # (key, matching pods per domain, weight, maxSkew)

    def raw(self, node: Obj) -> dict[str, float | None]:
        labels = node["metadata"].get("labels") or {}
        affinity = sum(w for w, terms in self.node_terms if node_filters.matches_terms(terms, node))
        untolerated = sum(
            1
            for taint in node_filters.node_taints(node)
            if taint.get("effect") == "PreferNoSchedule"
            and not any(node_filters.tolerates(t, taint) for t in self.tolerations)
        )
        together = sum(w * counts[labels[key]] for w, key, counts in self.pod_terms if key in labels)
        spread: float | None = 0.0
        for key, counts, weight, skew in self.spreads:
            if key not in labels:
                spread = None  # the plugin's invalid score: normalized to 0
                break
            spread = (spread or 0.0) + counts[labels[key]] * weight + (skew - 1)
        return {
            "NodeAffinity": float(affinity),
            "TaintToleration": float(untolerated),
            "InterPodAffinity": float(together),
            "PodTopologySpread": spread,
        }


def preferences(
    pod: Obj, nodes: list[Obj], *, every: list[Obj], pods: Callable[[], Iterable[Obj]]
) -> Preferences | None:
    """What the pod prefers over these nodes (found feasible among `every` node, whose pods are counted);
    None when nothing but room would tell them apart. `pods`: every pod, read only if terms need them."""
    spec = pod.get("spec") or {}
    affinity = spec.get("affinity") or {}
    node_terms = [
        (int(p.get("weight") or 0), [p.get("preference") or {}])
        for p in (affinity.get("nodeAffinity") or {}).get(PREFERRED) or []
    ]
    terms = [
        (sign * int(p.get("weight") or 0), p.get("podAffinityTerm") or {})
        for kind, sign in (("podAffinity", 1), ("podAntiAffinity", -1))
        for p in (affinity.get(kind) or {}).get(PREFERRED) or []
    ]
    anyway = [
        c
        for c in spec.get("topologySpreadConstraints") or []
        if c.get("whenUnsatisfiable") == "ScheduleAnyway"
    ]
    tainted = any(t.get("effect") == "PreferNoSchedule" for n in nodes for t in node_filters.node_taints(n))
    if not (node_terms or terms or anyway or tainted):
        return None
    placed = pod_topology.Placed.of(pods(), every) if terms or anyway else pod_topology.Placed({})
    pod_terms = [(w, term.get("topologyKey", ""), _selected(placed, pod, term)) for w, term in terms]
    return Preferences(
        node_terms, spec.get("tolerations") or [], pod_terms, _spreads(pod, anyway, placed, nodes=every)
    )


def _selected(placed: pod_topology.Placed, pod: Obj, term: Obj) -> Counter[str]:
    """How many placed pods the term selects in each domain of its topology key."""
    key = term.get("topologyKey", "")
    return Counter(
        d
        for other, where in placed.pods
        if (d := placed.value(where, key)) is not None and pod_topology.matches(term, pod, other)
    )


def _spreads(
    pod: Obj, constraints: list[Obj], placed: pod_topology.Placed, *, nodes: list[Obj]
) -> list[tuple[str, Counter[str], float, int]]:
    """Each ScheduleAnyway constraint's matching pods per domain, over the nodes the pod's selector and
    required affinity admit, and its weight (the log of its domains, plus 2)."""
    labels = pod["metadata"].get("labels") or {}
    spec = pod.get("spec") or {}
    eligible = {n["metadata"]["name"] for n in nodes if pod_topology.admits(spec, n)}
    out = []
    for constraint in constraints:
        key = constraint.get("topologyKey", "")
        selector = pod_topology.selector_with_label_keys(constraint, labels)
        domains, counts = pod_topology.spread_counts(
            placed, pod, key=key, selector=selector, eligible=eligible
        )
        weight = math.log(len(domains) + 2)
        out.append((key, counts, weight, int(constraint.get("maxSkew") or 1)))
    return out


def best(found: list[tuple[float, Obj]], prefers: Preferences | None) -> str | None:
    """The node kube-scheduler would bind to among those found (each with its room score, lower better):
    the highest total, the name breaking ties."""
    if not found:
        return None
    if prefers is None:
        return str(min((score, node["metadata"]["name"]) for score, node in found)[1])
    raws = [prefers.raw(node) for _, node in found]
    totals = [-score * MAX_SCORE for score, _ in found]
    for plugin, weight in WEIGHTS.items():
        for index, value in enumerate(_normalized(plugin, [r[plugin] for r in raws])):
            totals[index] += weight * value
    ranked = ((-total, node["metadata"]["name"]) for total, (_, node) in zip(totals, found, strict=True))
    return str(min(ranked)[1])


def _normalized(plugin: str, raw: list[float | None]) -> list[float]:
    values = [v for v in raw if v is not None]
    top = max(values, default=0.0)
    low = min(values, default=0.0)
    if plugin == "NodeAffinity":
        return [(v or 0.0) * MAX_SCORE / top if top else 0.0 for v in raw]
    if plugin == "TaintToleration":
        return [MAX_SCORE - (v or 0.0) * MAX_SCORE / top if top else MAX_SCORE for v in raw]
    if plugin == "InterPodAffinity":
        return [((v or 0.0) - low) * MAX_SCORE / (top - low) if top > low else 0.0 for v in raw]
    return [  # PodTopologySpread: fewer matching pods score higher
        0.0 if v is None else (MAX_SCORE if not top else MAX_SCORE * (top + low - v) / top) for v in raw
    ]
