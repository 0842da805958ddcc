"""Whether a pod an intent asks to move fits another node: Koordinator's `nodeFit` and `nodeSelector`.

Koordinator applies them where something asks its migration controller to evict a pod (its evictor's
pre-eviction filter, the descheduler's DefaultEvictor), before a job exists; a PodMigrationJob created
directly is not checked. Podherd's counterpart of that request is an intent, so an intent for a pod that
fits no other node is refused, naming what each node lacks; a job created directly (and a drain, which
kubectl does not check either) goes on, where its Reservation is the scheduler's own, complete answer.

The nodes are those `nodeSelector` selects and that are Ready; for each, in turn, what is cheap to tell
from the node alone first, then the pods on it (one list per node, until one fits).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from shared import node_fit
from shared.api import paths
from shared.kube import KubeClient

Obj = dict[str, Any]


class NodeFit:
    def __init__(self, kube: KubeClient, *, node_selector: str | None) -> None:
        self.kube, self.node_selector = kube, node_selector or ""

    async def why_not(self, pod: Obj) -> str | None:
        """None when `pod` fits one of the other selected Ready nodes; else why it fits none, as the
        scheduler says it. KubeError when the API server cannot tell."""
        own = (pod.get("spec") or {}).get("nodeName")
        nodes = [
            n
            for n in await self.kube.list_items(paths.NODES, self.node_selector)
            if node_fit.node_ready(n) and n["metadata"].get("name") != own
        ]
        reasons: Counter[str] = Counter()
        for node in nodes:
            # From the node alone first: a pod that would not fit it empty does not fit it.
            why = node_fit.elsewhere(pod, node, ())
            if why is None:
                where = f"spec.nodeName={node['metadata']['name']}"
                on_node = await self.kube.list_items(paths.PODS, "", field_selector=where)
                why = node_fit.elsewhere(pod, node, on_node)
            if why is None:
                return None
            reasons[why] += 1
        return node_fit.unavailable_message(reasons, len(nodes))
