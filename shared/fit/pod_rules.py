"""kube-scheduler's filters that read the pods already placed: PodTopologySpread and InterPodAffinity.

As their plugins do, what does not depend on the node is counted once per pod (`Placement.of`, their
PreFilter): matching pods per topology domain. Each node is then a few lookups (their Filter).

- Spread (`DoNotSchedule` constraints): pods of the pod's namespace its selector matches, terminating ones
  left out, counted over the nodes its node selector and required affinity admit (`nodeAffinityPolicy:
  Honor`; taints only with `nodeTaintsPolicy: Honor`) that carry every constraint's key. A node fails when
  its domain's count, plus one if the pod matches itself, less the smallest domain's (0 below `minDomains`
  domains) exceeds `maxSkew`, or when it lacks the key.
- Affinity: the domains of pods that match every required affinity term of the pod; a node must be in
  such a domain for each term, unless no pod matches them anywhere and the pod matches them itself (the first
  pod of a group), and must carry every term's key either way. Anti-affinity: no pod a term matches in the
  node's domain. Existing pods' anti-affinity: no placed pod whose required term matches this pod in the
  node's domain of that term.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from shared.api.selectors import matches_selector_dict
from shared.fit import node_rules
from shared.fit.cluster import Cluster
from shared.fit.views import AffinityTerm, NodeView, PodView, SpreadConstraint

SPREAD = "node(s) didn't match pod topology spread constraints"
SPREAD_MISSING_LABEL = "node(s) didn't match pod topology spread constraints (missing required label)"
AFFINITY = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"

Pair = tuple[str, str]


def term_selects(term: AffinityTerm, pod: PodView, cluster: Cluster) -> bool:
    """Whether the term selects `pod`: its namespaces (resolved against the term's own pod when read, or
    chosen by their labels), then its labels."""
    in_scope = term.namespaces is None or pod.namespace in term.namespaces
    if not in_scope and term.namespace_selector is not None:
        in_scope = matches_selector_dict(
            term.namespace_selector, cluster.namespace_labels.get(pod.namespace, {})
        )
    return in_scope and matches_selector_dict(term.selector, pod.labels)


@dataclass
class _Spread:
    constraint: SpreadConstraint
    counts: Counter[str]
    lowest: int
    self_match: int


@dataclass
class Placement:
    """A pod's PreFilter state for the two plugins: what each node is then checked against."""

    spreads: list[_Spread]
    affinity_terms: tuple[AffinityTerm, ...]
    affinity_counts: Counter[Pair]
    first_of_group: bool
    anti_terms: tuple[AffinityTerm, ...]
    anti_counts: Counter[Pair]
    shunned: Counter[Pair]

    @classmethod
    def of(cls, pod: PodView, cluster: Cluster) -> Placement | None:
        """None when neither plugin has anything to check for this pod."""
        shunning = [
            *cluster.shunning.get(pod.namespace, {}).values(),
            *cluster.shunning.get("*", {}).values(),
        ]
        if not (pod.spread or pod.affinity or pod.anti_affinity or shunning):
            return None
        affinity_counts: Counter[Pair] = Counter()
        anti_counts: Counter[Pair] = Counter()
        for other in _reached(pod, cluster):
            if pod.affinity and all(term_selects(t, other, cluster) for t in pod.affinity):
                _count(affinity_counts, pod.affinity, _labels(cluster, other))
            for term in pod.anti_affinity:
                if term_selects(term, other, cluster):
                    _count(anti_counts, (term,), _labels(cluster, other))
        shunned: Counter[Pair] = Counter()
        for other in shunning:
            for term in other.anti_affinity:
                if term_selects(term, pod, cluster):
                    _count(shunned, (term,), _labels(cluster, other))
        first = (
            bool(pod.affinity)
            and not affinity_counts
            and all(term_selects(t, pod, cluster) for t in pod.affinity)
        )
        return cls(
            spreads=_spreads(pod, cluster),
            affinity_terms=pod.affinity,
            affinity_counts=affinity_counts,
            first_of_group=first,
            anti_terms=pod.anti_affinity,
            anti_counts=anti_counts,
            shunned=shunned,
        )

    def spread_reasons(self, node: NodeView) -> tuple[str, ...]:
        for spread in self.spreads:
            domain = node.labels.get(spread.constraint.topology_key)
            if domain is None:
                return (SPREAD_MISSING_LABEL,)
            if spread.counts[domain] + spread.self_match - spread.lowest > spread.constraint.max_skew:
                return (SPREAD,)
        return ()

    def affinity_reasons(self, node: NodeView) -> tuple[str, ...]:
        labels = node.labels
        if self.affinity_terms:
            keys = [t.topology_key for t in self.affinity_terms]
            if any(k not in labels for k in keys):
                return (AFFINITY,)
            found = all(self.affinity_counts[(k, labels[k])] > 0 for k in keys)
            if not found and not self.first_of_group:
                return (AFFINITY,)
        for term in self.anti_terms:
            value = labels.get(term.topology_key)
            if value is not None and self.anti_counts[(term.topology_key, value)] > 0:
                return (ANTI_AFFINITY,)
        if self.shunned and any(self.shunned[pair] > 0 for pair in labels.items()):
            return (EXISTING_ANTI_AFFINITY,)
        return ()


def _count(counts: Counter[Pair], terms: tuple[AffinityTerm, ...], labels: Mapping[str, str]) -> None:
    for term in terms:
        value = labels.get(term.topology_key)
        if value is not None:
            counts[(term.topology_key, value)] += 1


def _spreads(pod: PodView, cluster: Cluster) -> list[_Spread]:
    if not pod.spread:
        return []
    keys = [c.topology_key for c in pod.spread]
    out = []
    for constraint in pod.spread:
        eligible = [
            node
            for node in cluster.nodes.values()
            if all(k in node.labels for k in keys)
            and (not constraint.honor_affinity or not node_rules.node_affinity(pod, node))
            and (not constraint.honor_taints or not node_rules.taints(pod, node))
        ]
        where = {node.name: node.labels[constraint.topology_key] for node in eligible}
        counts: Counter[str] = Counter(
            where[other.node]
            for other in cluster.by_namespace.get(pod.namespace, {}).values()
            if other.node in where
            and not other.terminating
            and matches_selector_dict(constraint.selector, other.labels)
        )
        domains = set(where.values())
        lowest = min((counts[d] for d in domains), default=0)
        if len(domains) < constraint.min_domains:
            lowest = 0
        self_match = 1 if matches_selector_dict(constraint.selector, pod.labels) else 0
        out.append(_Spread(constraint, counts, lowest, self_match))
    return out


def _labels(cluster: Cluster, pod: PodView) -> Mapping[str, str]:
    node = cluster.nodes.get(pod.node or "")
    return node.labels if node is not None else {}


def _reached(pod: PodView, cluster: Cluster) -> Iterable[PodView]:
    """The placed pods the pod's own affinity and anti-affinity terms may select: those of the namespaces
    they name, or every pod when one reaches further."""
    terms = (*pod.affinity, *pod.anti_affinity)
    if not terms:
        return ()
    if any(t.namespaces is None or t.namespace_selector is not None for t in terms):
        return cluster.pods()
    namespaces = set().union(*(t.namespaces or () for t in terms))
    return [p for ns in sorted(namespaces) for p in cluster.by_namespace.get(ns, {}).values()]
