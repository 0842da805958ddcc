"""The policies, each with the descheduler plugin's name, arguments and meaning, utilization by requests:

- LowNodeUtilization: nodes under every `thresholds` percentage are underutilized, nodes over any
  `targetThresholds` percentage overutilized. Pods leave overutilized nodes (lowest priority, then lowest
  deletion cost, first) for underutilized ones, until the node is back under its target thresholds or no
  underutilized node can take more without itself passing them. Nothing moves while no more than
  `numberOfNodes` nodes are underutilized.
- HighNodeUtilization: nodes under every `thresholds` percentage are emptied, least used first, onto the
  other nodes, fullest first (so a node autoscaler can remove them). A node is emptied whole or not at all:
  one pod that may not move or fits nowhere keeps all its pods where they are. DaemonSet pods stay.
- RemovePodsViolatingTopologySpreadConstraint: for each `DoNotSchedule` constraint of movable pods, while
  its largest domain holds more than `maxSkew` pods over its smallest, a pod leaves the largest domain for
  the smallest.

Each returns the measure it improves, before and after.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Generator, Mapping
from dataclasses import dataclass

from shared.api.selectors import matches_selector_dict
from shared.fit.views import PodView
from shared.rebalance.candidates import Candidate
from shared.rebalance.planning import Planning, fill

Thresholds = Mapping[str, float]


@dataclass(frozen=True)
class Measure:
    name: str
    before: float
    after: float


def _order(pods: list[Candidate]) -> list[Candidate]:
    return sorted(pods, key=lambda c: (c.priority, c.deletion_cost, -c.view.requests.get("cpu", 0), c.key))


def _under(usage: Mapping[str, float], thresholds: Thresholds) -> bool:
    return all(usage.get(r, 0.0) < limit for r, limit in thresholds.items())


def _over(usage: Mapping[str, float], thresholds: Thresholds) -> bool:
    return any(usage.get(r, 0.0) > limit for r, limit in thresholds.items())


def _schedulable(planning: Planning) -> list[str]:
    return sorted(n for n, node in planning.cluster.nodes.items() if not node.unschedulable)


def low_node_utilization(
    planning: Planning, *, thresholds: Thresholds, target_thresholds: Thresholds, number_of_nodes: int = 0
) -> Measure:
    cluster = planning.cluster
    names = _schedulable(planning)

    def outside() -> float:
        return float(sum(1 for n in names if _over(fill(cluster, n), target_thresholds)))

    before = outside()
    # The emptiest first, as each move leaves them: the moves spread over the underutilized nodes, so no
    # node is filled to its targets while another stays empty.
    under = [(sum(fill(cluster, n).values()), n) for n in names if _under(fill(cluster, n), thresholds)]
    heapq.heapify(under)
    over = sorted(
        (n for n in names if _over(fill(cluster, n), target_thresholds)),
        key=lambda n: -sum(fill(cluster, n).values()),
    )
    if len(under) <= number_of_nodes or not over:
        return Measure("nodes over targetThresholds", before, before)
    for node in over:
        for pod in _order(planning.on(node)):
            if not _over(fill(cluster, node), target_thresholds):
                break
            targets = _roomy(planning, pod.view, under, limits=target_thresholds)
            planning.move(pod, targets, why=f"LowNodeUtilization: {node} is over its targetThresholds")
            targets.close()  # the nodes it looked at go back, as the move left them
    return Measure("nodes over targetThresholds", before, outside())


def _roomy(
    planning: Planning, pod: PodView, under: list[tuple[float, str]], *, limits: Thresholds
) -> Generator[str, None, None]:
    """The underutilized nodes, least used first, that stay within `limits` with the pod added. `under` is a
    heap of (fill, node); each node looked at goes back with its fill as it is then, once the generator is
    closed."""
    looked: list[str] = []
    try:
        while under:
            _, node = heapq.heappop(under)
            looked.append(node)
            if _stays_under(planning, pod, node, limits=limits):
                yield node
    finally:
        for node in looked:
            heapq.heappush(under, (sum(fill(planning.cluster, node).values()), node))


def _stays_under(planning: Planning, pod: PodView, node: str, *, limits: Thresholds) -> bool:
    """Whether `node` stays within `limits` with the pod's requests added."""
    cluster = planning.cluster
    allocatable, used = cluster.nodes[node].allocatable, cluster.used.get(node, {})
    for resource, limit in limits.items():
        total = allocatable.get(resource, 0)
        if total and 100.0 * (used.get(resource, 0) + pod.requests.get(resource, 0)) / total > limit:
            return False
    return True


def high_node_utilization(planning: Planning, *, thresholds: Thresholds) -> Measure:
    cluster = planning.cluster
    names = _schedulable(planning)

    def emptied() -> float:
        return float(sum(1 for n in names if not planning.on(n) or n in planning.emptying))

    before = emptied()
    under = sorted(
        (n for n in names if _under(fill(cluster, n), thresholds) and planning.on(n)),
        key=lambda n: sum(fill(cluster, n).values()),
    )
    planning.emptying.update(under)
    # The fullest first, as they were before the plan: moves fill them further, never empty them.
    targets = sorted(
        (n for n in names if n not in planning.emptying), key=lambda n: -sum(fill(cluster, n).values())
    )
    for node in under:
        pods = [p for p in planning.on(node) if not _daemon(p)]
        done = 0
        for pod in _order(pods):
            if planning.move(pod, targets, why=f"HighNodeUtilization: emptying {node}") is None:
                break
            done += 1
        if done < len(pods):
            planning.take_back(done)
            planning.emptying.discard(node)
            for pod in pods:
                planning.skipped.setdefault(pod.key, f"{node} cannot be emptied whole")
    return Measure("nodes emptied", before, emptied())


def _daemon(pod: Candidate) -> bool:
    return (pod.owner or "").startswith("DaemonSet/")


def spread_repair(planning: Planning) -> Measure:
    """RemovePodsViolatingTopologySpreadConstraint, for the `DoNotSchedule` constraints."""
    rules = _spread_rules(planning)

    def excess() -> float:
        return float(sum(max(0, _skew(planning, rule)[0] - rule.max_skew) for rule in rules))

    before = excess()
    for rule in rules:
        for _ in range(len(rule.members)):
            skew, largest, smallest = _skew(planning, rule)
            if skew <= rule.max_skew or not _repair_one(planning, rule, largest=largest, smallest=smallest):
                break
    return Measure("pods over maxSkew", before, excess())


@dataclass(frozen=True)
class _SpreadRule:
    namespace: str
    key: str
    max_skew: int
    members: tuple[str, ...]  # the pods its selector matches in its namespace (not terminating)
    domains: frozenset[str]


def _repair_one(planning: Planning, rule: _SpreadRule, *, largest: str, smallest: str) -> bool:
    """One pod of the rule's from the largest domain to the smallest: whether one could move."""
    cluster = planning.cluster
    movers = [
        planning.candidates[key]
        for key in rule.members
        if key in planning.candidates
        and key not in planning.skipped
        and _domain(planning, key, rule.key) == largest
    ]
    targets = sorted(n for n, node in cluster.nodes.items() if node.labels.get(rule.key) == smallest)
    why = f"spread over {rule.key}: {largest} holds more than {rule.max_skew} over {smallest}"
    return any(planning.move(pod, targets, why=why) is not None for pod in _order(movers))


def _domain(planning: Planning, pod: str, key: str) -> str | None:
    namespace = pod.split("/", 1)[0]
    view = planning.cluster.by_namespace.get(namespace, {}).get(pod)
    node = planning.cluster.nodes.get(view.node or "") if view is not None else None
    return node.labels.get(key) if node is not None else None


def _spread_rules(planning: Planning) -> list[_SpreadRule]:
    """Each distinct constraint of the candidates', with the pods it counts, found once."""
    cluster = planning.cluster
    seen: dict[str, _SpreadRule] = {}
    for pod in planning.candidates.values():
        for c in pod.view.spread:
            found = repr((pod.view.namespace, c.topology_key, c.max_skew, c.selector))
            if found in seen:
                continue
            members = tuple(
                key
                for key, other in cluster.by_namespace.get(pod.view.namespace, {}).items()
                if not other.terminating and matches_selector_dict(c.selector, other.labels)
            )
            domains = frozenset(
                n.labels[c.topology_key]
                for n in cluster.nodes.values()
                if c.topology_key in n.labels and not n.unschedulable
            )
            seen[found] = _SpreadRule(pod.view.namespace, c.topology_key, c.max_skew, members, domains)
    return list(seen.values())


def _skew(planning: Planning, rule: _SpreadRule) -> tuple[int, str, str]:
    """How many more matching pods the largest domain holds than the smallest, and those two domains."""
    counts: Counter[str] = Counter(dict.fromkeys(rule.domains, 0))
    for key in rule.members:
        domain = _domain(planning, key, rule.key)
        if domain in rule.domains:
            counts[str(domain)] += 1
    if not counts:
        return 0, "", ""
    largest = max(sorted(counts), key=lambda d: counts[d])
    smallest = min(sorted(counts), key=lambda d: counts[d])
    return counts[largest] - counts[smallest], largest, smallest
