"""What the gate reads of a pod before it makes a job for it: the pod as the watcher describes it, its
workload with the replicas it expects, and what its PodDisruptionBudgets allow now (read only where the
surge switches look at them). A workload whose kind the gate cannot read here (beyond Kubernetes' own) is
left for the arbitrator to judge."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from shared.api import paths
from shared.api.messages import PodInfo
from shared.api.objects import RawPdb, RawPod, RawWorkload, WorkloadResolver, pdb_info, pod_info
from shared.config.model import MigrationControllerArgs
from shared.kube.client import KubeClient
from shared.rules.facts import WorkloadFacts, workload_key

# The workload kinds whose expected replicas the gate reads (`spec.replicas`, 1 when unset as the API
# server defaults it); its ClusterRole grants `get` on exactly these.
READABLE: dict[str, Callable[[str, str], str]] = {
    "Deployment": paths.deployment,
    "StatefulSet": paths.statefulset,
    "ReplicaSet": paths.replicaset,
    "ReplicationController": paths.replication_controller,
}
TIMEOUT = 3.0


class Unknown(Exception):
    """The pod's workload could not be read here: its job is made, and the arbitrator judges it."""


@dataclass(frozen=True)
class PodFacts:
    pod: PodInfo
    workload: WorkloadFacts | None
    budgets: list[int]  # each PodDisruptionBudget's disruptionsAllowed (read only for the surge switches)


async def read_facts(kube: KubeClient, raw: dict[str, Any], args: MigrationControllerArgs) -> PodFacts:
    """The facts of pod `raw` (as read from the API). Raises Unknown when its workload cannot be read."""
    resolver = WorkloadResolver()
    owner = ((raw.get("metadata") or {}).get("ownerReferences")) or []
    namespace = str((raw.get("metadata") or {}).get("namespace") or "")
    replica_set = next((o for o in owner if o.get("controller") and o.get("kind") == "ReplicaSet"), None)
    if replica_set is not None:
        found = await kube.get_json(paths.replicaset(namespace, replica_set["name"]), request_timeout=TIMEOUT)
        if found is not None:
            resolver.observe("ADDED", msgspec.convert(found, RawWorkload, strict=False))
    pod = pod_info(msgspec.convert(raw, RawPod, strict=False), resolver)
    workload = None
    if pod.workload is not None:
        path = READABLE.get(pod.workload.kind)
        if path is None:
            raise Unknown(pod.workload.kind)
        found = await kube.get_json(path(namespace, pod.workload.name), request_timeout=TIMEOUT)
        replicas = ((found or {}).get("spec") or {}).get("replicas", 1) if found is not None else 0
        workload = WorkloadFacts(key=workload_key(pod.workload), replicas=int(replicas))
    budgets: list[int] = []
    if args.surge.zero_disruption_deployments:
        items = await kube.list_items(paths.disruption_budgets(namespace), "", request_timeout=TIMEOUT)
        infos = (pdb_info(msgspec.convert(item, RawPdb, strict=False)) for item in items)
        budgets = [info.disruptions_allowed for info in infos if info.selects(pod.labels)]
    return PodFacts(pod, workload, budgets)
