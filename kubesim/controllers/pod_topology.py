"""kube-scheduler's InterPodAffinity and PodTopologySpread filters: where a pod may go given the pods already
placed. Required (anti-)affinity terms only (preferred ones only score); topology spread constraints with
`whenUnsatisfiable: DoNotSchedule` (ScheduleAnyway ones only score), `minDomains` and `matchLabelKeys`,
counting over the nodes the pod's node selector and required node affinity admit (`nodeAffinityPolicy:
Honor`, taints ignored: `nodeTaintsPolicy: Ignore`). Terminating pods are not counted."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kubesim.records import Obj
from shared import node_fit
from shared.selectors import matches_selector_dict

AFFINITY = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
SPREAD = "node(s) didn't match pod topology spread constraints"
SPREAD_LABEL = "node(s) didn't match pod topology spread constraints (missing required label)"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
EVERY_TAINT = [{"operator": "Exists"}]


@dataclass
class Placed:
    """The pods bound to nodes (not terminating, not ended), with their nodes' labels."""

    nodes: dict[str, dict[str, str]]  # node name -> its labels
    pods: list[tuple[Obj, str]] = field(default_factory=list)  # (pod, its node)

    @classmethod
    def of(cls, pods: Iterable[Obj], nodes: Iterable[Obj]) -> Placed:
        placed = cls({n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in nodes})
        for pod in pods:
            node = (pod.get("spec") or {}).get("nodeName")
            phase = (pod.get("status") or {}).get("phase")
            if node and not pod["metadata"].get("deletionTimestamp") and phase not in ("Succeeded", "Failed"):
                placed.pods.append((pod, node))
        return placed

    def value(self, node: str, key: str) -> str | None:
        return self.nodes.get(node, {}).get(key)


def constrained(spec: Obj) -> bool:
    """Whether the pod has anything these filters read of its own."""
    affinity = spec.get("affinity") or {}
    terms = any((affinity.get(kind) or {}).get(REQUIRED) for kind in ("podAffinity", "podAntiAffinity"))
    return terms or any(
        c.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule"
        for c in spec.get("topologySpreadConstraints") or []
    )


def has_anti_affinity(pod: Obj) -> bool:
    return bool((((pod.get("spec") or {}).get("affinity") or {}).get("podAntiAffinity") or {}).get(REQUIRED))


def filter_for(
    pod: Obj, nodes: list[Obj], *, pods: Callable[[], Iterable[Obj]], placed_terms: bool
) -> Callable[[Obj], str | None] | None:
    """The filters for `pod` over `nodes`, if its own terms or the placed pods' anti-affinity
    (`placed_terms`) ask for them: None when nothing would be checked. `pods`: every pod, read only then."""
    if not (constrained(pod.get("spec") or {}) or placed_terms):
        return None
    placed = Placed.of(pods(), nodes)
    return lambda node: reject(pod, node, placed=placed, all_nodes=nodes)


def reject(pod: Obj, node: Obj, *, placed: Placed, all_nodes: list[Obj]) -> str | None:
    """Why `pod` may not go to `node` given the pods placed; None: it may."""
    name = node["metadata"]["name"]
    spec = pod.get("spec") or {}
    affinity = spec.get("affinity") or {}
    own = (affinity.get("podAffinity") or {}).get(REQUIRED) or []
    if own and not _affinity_holds(pod, own, node=name, placed=placed):
        return AFFINITY
    for term in (affinity.get("podAntiAffinity") or {}).get(REQUIRED) or []:
        domain = placed.value(name, term.get("topologyKey", ""))
        if domain is not None and any(
            _in_domain(placed, term, pod, other=other, domain=domain) for other in placed.pods
        ):
            return ANTI_AFFINITY
    for other, where in placed.pods:
        for term in (((other.get("spec") or {}).get("affinity") or {}).get("podAntiAffinity") or {}).get(
            REQUIRED
        ) or []:
            key = term.get("topologyKey", "")
            mine = placed.value(name, key)
            if mine is not None and mine == placed.value(where, key) and _matches(term, other, pod):
                return EXISTING_ANTI_AFFINITY
    return _spread(pod, name, placed=placed, all_nodes=all_nodes)


def _matches(term: Obj, owner: Obj, pod: Obj) -> bool:
    """Whether `pod` is one `owner`'s term selects: its namespaces (the owner's by default) and labels."""
    namespaces = term.get("namespaces") or []
    everywhere = term.get("namespaceSelector") == {}
    in_scope = everywhere or pod["metadata"].get("namespace") in (
        namespaces or [owner["metadata"].get("namespace")]
    )
    return in_scope and matches_selector_dict(term.get("labelSelector"), pod["metadata"].get("labels") or {})


def _in_domain(placed: Placed, term: Obj, pod: Obj, *, other: tuple[Obj, str], domain: str) -> bool:
    found, where = other
    return placed.value(where, term.get("topologyKey", "")) == domain and _matches(term, pod, found)


def _affinity_holds(pod: Obj, terms: list[Obj], *, node: str, placed: Placed) -> bool:
    if all(_term_met(pod, term, node=node, placed=placed) for term in terms):
        return True
    # The first pod of a group that selects itself: no pod anywhere matches, and it matches its own terms.
    nobody = not any(_matches(t, pod, other) for t in terms for other, _ in placed.pods)
    return nobody and all(_matches(t, pod, pod) for t in terms)


def _term_met(pod: Obj, term: Obj, *, node: str, placed: Placed) -> bool:
    domain = placed.value(node, term.get("topologyKey", ""))
    return domain is not None and any(
        _in_domain(placed, term, pod, other=other, domain=domain) for other in placed.pods
    )


def _spread(pod: Obj, node: str, *, placed: Placed, all_nodes: list[Obj]) -> str | None:
    spec = pod.get("spec") or {}
    constraints = [
        c
        for c in spec.get("topologySpreadConstraints") or []
        if c.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule"
    ]
    if not constraints:
        return None
    labels = pod["metadata"].get("labels") or {}
    eligible = [n["metadata"]["name"] for n in all_nodes if _admits(spec, n)]
    for constraint in constraints:
        key = constraint.get("topologyKey", "")
        mine = placed.value(node, key)
        if mine is None:
            return SPREAD_LABEL
        selector = _with_label_keys(constraint, labels)
        domains = {placed.value(n, key) for n in eligible} - {None}
        counts: Counter[str | None] = Counter(
            placed.value(where, key)
            for other, where in placed.pods
            if where in eligible
            and other["metadata"].get("namespace") == pod["metadata"].get("namespace")
            and matches_selector_dict(selector, other["metadata"].get("labels") or {})
        )
        lowest = min((counts[d] for d in domains), default=0)
        if len(domains) < int(constraint.get("minDomains") or 1):
            lowest = 0
        self_match = 1 if matches_selector_dict(selector, labels) else 0
        if counts[mine] + self_match - lowest > int(constraint.get("maxSkew") or 1):
            return SPREAD
    return None


def _with_label_keys(constraint: Obj, labels: dict[str, str]) -> Obj | None:
    """The constraint's selector (none selects no pod), with the pod's own values of its `matchLabelKeys`."""
    if constraint.get("labelSelector") is None:
        return None
    selector = dict(constraint["labelSelector"])
    keys = [k for k in constraint.get("matchLabelKeys") or [] if k in labels]
    if keys:
        selector["matchLabels"] = {**(selector.get("matchLabels") or {}), **{k: labels[k] for k in keys}}
    return selector


def _admits(spec: Obj, node: Obj) -> bool:
    """The node passes the pod's node selector and required node affinity (its taints ignored)."""
    return node_fit.reject({**spec, "tolerations": EVERY_TAINT}, node) is None
