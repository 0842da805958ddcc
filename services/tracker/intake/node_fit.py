"""Whether a pod an intent asks to move fits another node: Koordinator's `nodeFit` and `nodeSelector`.

Koordinator applies them where something asks its migration controller to evict a pod (its evictor's
pre-eviction filter, the descheduler's DefaultEvictor), before a job exists; a PodMigrationJob created
directly is not checked. Podherd's counterpart of that request is an intent, so an intent for a pod that
fits no other node is refused, naming what each node lacks; a job created directly (and a drain, which
kubectl does not check either) goes on, where its Reservation is the scheduler's own, complete answer.

The nodes are those `nodeSelector` selects and that are Ready, less cordoned ones (the descheduler's NodeFit
never counts them, whatever the pod tolerates). Each is checked as kube-scheduler would check the
replacement (`shared.fit`), with the pod itself still in place, as it is while its room is reserved. The
node filters need only a node's own pods, listed one node at a time until one fits; the pods of the whole
cluster are read only for a pod whose own affinity or spread terms need them. Volumes are not read here:
the Reservation answers for them.
"""

from __future__ import annotations

from typing import Any

from shared.api import paths
from shared.fit.check import Fit, unavailable
from shared.fit.cluster import Cluster
from shared.fit.node_rules import UNSCHEDULABLE
from shared.fit.views import NOT_READY_TAINT, UNREACHABLE_TAINT, NodeView, PodView, node_view, pod_view
from shared.kube.client import KubeClient

Obj = dict[str, Any]
LIFECYCLE = frozenset({NOT_READY_TAINT, UNREACHABLE_TAINT})


class NodeFit:
    def __init__(self, kube: KubeClient, *, node_selector: str | None) -> None:
        self.kube, self.node_selector = kube, node_selector or ""

    async def why_not(self, pod: Obj) -> str | None:
        """None when `pod` fits one of the other selected Ready nodes; else why it fits none, as the
        scheduler says it. KubeError when the API server cannot tell."""
        moving = pod_view(pod)
        nodes = [
            n
            for n in map(node_view, await self.kube.list_items(paths.NODES, self.node_selector))
            if n.name != moving.node and not any(t.key in LIFECYCLE for t in n.taints)
        ]
        everyone: Fit | None = None
        if moving.affinity or moving.anti_affinity or moving.spread:
            pods = [pod_view(p) for p in await self.kube.list_items(paths.PODS, "")]
            everyone = Fit(Cluster.of(nodes, pods), moving)
        verdicts: dict[str, tuple[str, ...]] = {}
        for node in nodes:
            verdicts[node.name] = await self._verdict(moving, node, everyone)
            if not verdicts[node.name]:
                return None
        return unavailable(verdicts)

    async def _verdict(self, moving: PodView, node: NodeView, everyone: Fit | None) -> tuple[str, ...]:
        if node.unschedulable:
            return (UNSCHEDULABLE,)
        if everyone is not None:
            return everyone.reasons(node)
        # From the node alone first: a pod that would not fit it empty does not fit it.
        alone = Fit(Cluster.of([node], ()), moving).reasons(node)
        if alone:
            return alone
        where = f"spec.nodeName={node.name}"
        on_node = [pod_view(p) for p in await self.kube.list_items(paths.PODS, "", field_selector=where)]
        return Fit(Cluster.of([node], on_node), moving).reasons(node)
