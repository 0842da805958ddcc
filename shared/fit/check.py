"""One pod against the nodes of a cluster: the default profile's filters, in order, first failure wins."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from shared.fit import node_rules
from shared.fit.cluster import Cluster
from shared.fit.pod_rules import Placement
from shared.fit.views import NodeView, PodView


class Fit:
    """Whether `pod` fits each node of `cluster`. `node_name`: the node it names (spec.nodeName) or a
    Reservation pins it to, if any."""

    def __init__(self, cluster: Cluster, pod: PodView, *, node_name: str | None = None) -> None:
        self.cluster, self.pod, self.node_name = cluster, pod, node_name
        self.placement = Placement.of(pod, cluster)

    def reasons(self, node: NodeView) -> tuple[str, ...]:
        """Why `node` cannot take the pod, as the first filter that refuses it says; empty: it can."""
        pod, cluster = self.pod, self.cluster
        found = (
            node_rules.unschedulable(pod, node)
            or node_rules.node_name(self.node_name, node)
            or node_rules.taints(pod, node)
            or node_rules.node_affinity(pod, node)
            or node_rules.resources(
                pod,
                node,
                used=cluster.used.get(node.name, {}),
                count=cluster.count_on(node.name),
                bonus=cluster.bonus_for(pod, node.name),
            )
            or node_rules.volumes(pod, node, cluster.volumes)
        )
        if found or self.placement is None:
            return found
        return self.placement.spread_reasons(node) or self.placement.affinity_reasons(node)

    def fits(self, node: NodeView) -> bool:
        return not self.reasons(node)

    def verdicts(self, nodes: Iterable[NodeView] | None = None) -> dict[str, tuple[str, ...]]:
        return {n.name: self.reasons(n) for n in (self.cluster.nodes.values() if nodes is None else nodes)}


def unavailable(verdicts: Mapping[str, tuple[str, ...]]) -> str:
    """The scheduler's FailedScheduling message for these verdicts: each reason with the number of nodes
    that gave it, sorted."""
    counts: Counter[str] = Counter(reason for reasons in verdicts.values() for reason in reasons)
    parts = ", ".join(f"{count} {reason}" for reason, count in sorted(counts.items()))
    total = len(verdicts)
    return f"0/{total} nodes are available: {parts}." if parts else f"0/{total} nodes are available."
