"""kube-scheduler's InterPodAffinity and PodTopologySpread filters: where a pod may go given the pods already
placed. Required (anti-)affinity terms only; topology spread constraints with `whenUnsatisfiable:
DoNotSchedule` (preferred terms and ScheduleAnyway ones score: kubesim.controllers.node_scores), `minDomains`
and `matchLabelKeys`,
counting over the nodes the pod's node selector and required node affinity admit (`nodeAffinityPolicy:
Honor`, taints ignored: `nodeTaintsPolicy: Ignore`). Terminating pods are not counted."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kubesim.apiserver.records import Obj
from kubesim.controllers import node_filters
from shared.api.selectors import matches_selector_dict

AFFINITY = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
SPREAD = "node(s) didn't match pod topology spread constraints"
SPREAD_LABEL = "node(s) didn't match pod topology spread constraints (missing required label)"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
EVERY_TAINT = [{"operator": "Exists"}]


@dataclass
class Placed:
    """The pods bound to nodes (not ended), with their nodes' labels. Inter-pod affinity reads them all;
    spread counts only those not terminating (`live`)."""

    nodes: dict[str, dict[str, str]]  # node name -> its labels
    pods: list[tuple[Obj, str]] = field(default_factory=list)  # (pod, its node)
    live: list[tuple[Obj, str]] = field(default_factory=list)

    @classmethod
    def of(cls, pods: Iterable[Obj], nodes: Iterable[Obj]) -> Placed:
        placed = cls({n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in nodes})
        for pod in pods:
            node = (pod.get("spec") or {}).get("nodeName")
            phase = (pod.get("status") or {}).get("phase")
            if node and phase not in ("Succeeded", "Failed"):
                placed.pods.append((pod, node))
                if not pod["metadata"].get("deletionTimestamp"):
                    placed.live.append((pod, node))
        return placed

    def value(self, node: str, key: str) -> str | None:
        return self.nodes.get(node, {}).get(key)


def constrained(spec: Obj) -> bool:
    """Whether the pod has anything these filters read of its own."""
    affinity = spec.get("affinity") or {}
    terms = any((affinity.get(kind) or {}).get(REQUIRED) for kind in ("podAffinity", "podAntiAffinity"))
    return terms or any(_hard(c) for c in spec.get("topologySpreadConstraints") or [])


def _hard(constraint: Obj) -> bool:
    return bool(constraint.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule")


def has_anti_affinity(pod: Obj) -> bool:
    return bool(_anti_terms(pod))


def filter_for(
    pod: Obj, nodes: list[Obj], *, pods: Callable[[], Iterable[Obj]], placed_terms: bool
) -> Callable[[Obj], str | None] | None:
    """The filters for `pod` over `nodes`, if its own terms or the placed pods' anti-affinity
    (`placed_terms`) ask for them: None when nothing would be checked. `pods`: every pod, read only then.
    What does not depend on the node (the domains each term finds its pods in, the spread counts) is
    worked out once here; each node is then a lookup per term."""
    if not (constrained(pod.get("spec") or {}) or placed_terms):
        return None
    placed = Placed.of(pods(), nodes)
    domains = _Domains.of(pod, placed)
    spreads = _spreads(pod, placed, nodes)

    def reject(node: Obj) -> str | None:
        labels = node["metadata"].get("labels") or {}
        return _spread_reject(spreads, labels) or domains.reject(labels)

    return reject


@dataclass
class _Domains:
    """For each topology key a term names, the domains (its values) the term's pods are in."""

    affinity_keys: list[str]  # the keys of the pod's required affinity terms
    together: set[tuple[str, str]]  # (key, domain) of pods that match every one of those terms
    first_of_group: bool  # no placed pod matches them all, and the pod matches them itself
    anti: list[tuple[str, set[str]]]  # the pod's required anti-affinity terms
    shunned: list[tuple[str, set[str]]]  # where placed pods' anti-affinity terms select the pod

    @classmethod
    def of(cls, pod: Obj, placed: Placed) -> _Domains:
        affinity = (pod.get("spec") or {}).get("affinity") or {}
        own = (affinity.get("podAffinity") or {}).get(REQUIRED) or []
        anti = (affinity.get("podAntiAffinity") or {}).get(REQUIRED) or []
        keys = [t.get("topologyKey", "") for t in own]
        together = {
            (key, domain)
            for other, where in placed.pods
            if own and all(matches(t, pod, other) for t in own)
            for key in keys
            if (domain := placed.value(where, key)) is not None
        }
        # The first pod of a group that selects itself: no pod anywhere matches, and it matches its own terms.
        first = bool(own) and not together and all(matches(t, pod, pod) for t in own)
        shunned = [
            _shunning(placed, term, where)
            for other, where in placed.pods
            for term in _anti_terms(other)
            if matches(term, other, pod)
        ]
        return cls(keys, together, first, [_where(placed, pod, term) for term in anti], shunned)

    def reject(self, labels: dict[str, str]) -> str | None:
        if any(k not in labels for k in self.affinity_keys):
            return AFFINITY
        if not self.first_of_group and any((k, labels[k]) not in self.together for k in self.affinity_keys):
            return AFFINITY
        if any(labels.get(k) in d for k, d in self.anti):
            return ANTI_AFFINITY
        if any(labels.get(k) in d for k, d in self.shunned):
            return EXISTING_ANTI_AFFINITY
        return None


def _shunning(placed: Placed, term: Obj, where: str) -> tuple[str, set[str]]:
    """A placed pod's anti-affinity term that selects the pod: its key and the domain it keeps it out of."""
    key = term.get("topologyKey", "")
    domain = placed.value(where, key)
    return key, {domain} if domain is not None else set()


def _anti_terms(pod: Obj) -> list[Obj]:
    return (((pod.get("spec") or {}).get("affinity") or {}).get("podAntiAffinity") or {}).get(REQUIRED) or []


def _where(placed: Placed, pod: Obj, term: Obj) -> tuple[str, set[str]]:
    """The term's topology key, and the domains of the placed pods it selects (a node without the key is in
    none)."""
    key = term.get("topologyKey", "")
    found = {placed.value(where, key) for other, where in placed.pods if matches(term, pod, other)}
    return key, {d for d in found if d is not None}


def matches(term: Obj, owner: Obj, pod: Obj) -> bool:
    """Whether `pod` is one `owner`'s term selects: its namespaces (the owner's by default) and labels."""
    namespaces = term.get("namespaces") or []
    everywhere = term.get("namespaceSelector") == {}
    in_scope = everywhere or pod["metadata"].get("namespace") in (
        namespaces or [owner["metadata"].get("namespace")]
    )
    return in_scope and matches_selector_dict(term.get("labelSelector"), pod["metadata"].get("labels") or {})


@dataclass
class _Spread:
    key: str
    counts: Counter[str]  # matching pods per domain, over the nodes the pod may go to
    lowest: int
    self_match: int
    max_skew: int


def _spreads(pod: Obj, placed: Placed, nodes: list[Obj]) -> list[_Spread]:
    spec = pod.get("spec") or {}
    labels = pod["metadata"].get("labels") or {}
    hard = [c for c in spec.get("topologySpreadConstraints") or [] if _hard(c)]
    keys = [c.get("topologyKey", "") for c in hard]
    eligible = {
        n["metadata"]["name"]
        for n in nodes
        if admits(spec, n) and all(k in (n["metadata"].get("labels") or {}) for k in keys)
    }
    out = []
    for constraint in hard:
        key = constraint.get("topologyKey", "")
        selector = selector_with_label_keys(constraint, labels)
        domains, counts = spread_counts(placed, pod, key=key, selector=selector, eligible=eligible)
        lowest = min((counts[d] for d in domains), default=0)
        if len(domains) < int(constraint.get("minDomains") or 1):
            lowest = 0
        self_match = 1 if matches_selector_dict(selector, labels) else 0
        out.append(_Spread(key, counts, lowest, self_match, int(constraint.get("maxSkew") or 1)))
    return out


def spread_counts(
    placed: Placed, pod: Obj, *, key: str, selector: Obj | None, eligible: set[str]
) -> tuple[set[str], Counter[str]]:
    """A spread constraint's domains among the eligible nodes, and the pods of the pod's namespace its
    selector matches in each (on eligible nodes)."""
    domains = {d for n in eligible if (d := placed.value(n, key)) is not None}
    counts: Counter[str] = Counter(
        d
        for other, where in placed.live
        if where in eligible
        and (d := placed.value(where, key)) is not None
        and other["metadata"].get("namespace") == pod["metadata"].get("namespace")
        and matches_selector_dict(selector, other["metadata"].get("labels") or {})
    )
    return domains, counts


def _spread_reject(spreads: list[_Spread], labels: dict[str, str]) -> str | None:
    for spread in spreads:
        mine = labels.get(spread.key)
        if mine is None:
            return SPREAD_LABEL
        if spread.counts[mine] + spread.self_match - spread.lowest > spread.max_skew:
            return SPREAD
    return None


def selector_with_label_keys(constraint: Obj, labels: dict[str, str]) -> Obj | None:
    """The constraint's selector (none selects no pod), with the pod's own values of its `matchLabelKeys`."""
    if constraint.get("labelSelector") is None:
        return None
    selector = dict(constraint["labelSelector"])
    keys = [k for k in constraint.get("matchLabelKeys") or [] if k in labels]
    if keys:
        selector["matchLabels"] = {**(selector.get("matchLabels") or {}), **{k: labels[k] for k in keys}}
    return selector


def admits(spec: Obj, node: Obj) -> bool:
    """The node passes the pod's node selector and required node affinity (its taints ignored)."""
    return node_filters.reject({**spec, "tolerations": EVERY_TAINT}, node) is None
