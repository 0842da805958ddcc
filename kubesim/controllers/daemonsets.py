"""The DaemonSet controller: one pod of each DaemonSet on every node that should run it.

As kube-controller-manager's: a node should run the pod when the template's node selector and required node
affinity match it and its taints are tolerated, with the tolerations the controller adds to every daemon
pod (NotReady and unreachable nodes, pressure, cordoned nodes; a network that is not up for host-network
pods). Room is not asked: the scheduler places the pod, pinned to its node by a required node affinity on
`metadata.name`. A node that should not run it loses its pod; a daemon pod that failed is replaced.
"""

from __future__ import annotations

import copy
from collections import defaultdict

from kubesim.apiserver.records import Event, Obj, controller_ref
from kubesim.apiserver.store import Store
from kubesim.controllers import node_filters
from kubesim.controllers.base import Controller
from kubesim.controllers.owned import is_active, is_ready, owner_ref, template_hash
from kubesim.options import SimOptions

_ADDED_TOLERATIONS = (
    ("node.kubernetes.io/not-ready", "NoExecute"),
    ("node.kubernetes.io/unreachable", "NoExecute"),
    ("node.kubernetes.io/disk-pressure", "NoSchedule"),
    ("node.kubernetes.io/memory-pressure", "NoSchedule"),
    ("node.kubernetes.io/pid-pressure", "NoSchedule"),
    ("node.kubernetes.io/unschedulable", "NoSchedule"),
)


def daemon_pod_spec(template_spec: Obj) -> Obj:
    """The template's pod spec with the tolerations every daemon pod gets (those it lacks, appended)."""
    spec = copy.deepcopy(template_spec)
    tolerations = spec.setdefault("tolerations", [])
    added = list(_ADDED_TOLERATIONS)
    if spec.get("hostNetwork"):
        added.append(("node.kubernetes.io/network-unavailable", "NoSchedule"))
    for key, effect in added:
        if not any(t.get("key") == key and t.get("effect") == effect for t in tolerations):
            tolerations.append({"key": key, "operator": "Exists", "effect": effect})
    return spec


def placement(spec: Obj, node: Obj) -> tuple[bool, bool]:
    """(should run, may keep running) a daemon pod of `spec` on `node`: its name, selector and affinity
    decide both; an untolerated taint stops a new pod, and removes a running one only if it is NoExecute."""
    name = node["metadata"]["name"]
    if spec.get("nodeName") not in (None, "", name):
        return False, False
    if node_filters.reject({**spec, "tolerations": [{"operator": "Exists"}]}, node) is not None:
        return False, False
    if node_filters.reject(spec, node) is None:
        return True, True
    no_execute = [t for t in node_filters.node_taints(node) if t.get("effect") == "NoExecute"]
    return False, node_filters.reject(
        {**spec, "nodeSelector": None, "affinity": None}, _tainted(node, no_execute)
    ) is None


def _tainted(node: Obj, taints: list[Obj]) -> Obj:
    """`node` as if it had only `taints` (and were schedulable and Ready)."""
    return {"metadata": node["metadata"], "spec": {"taints": taints}, "status": {}}


def pinned_to(spec: Obj, node: str) -> Obj:
    """`spec` placed on `node` only: its required node affinity becomes the node's name."""
    pinned = copy.deepcopy(spec)
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    affinity = pinned.setdefault("affinity", {}).setdefault("nodeAffinity", {})
    affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": [term]}
    return pinned


def pod_node(pod: Obj) -> str | None:
    """The node a daemon pod is for: where it runs, else the node its affinity pins it to."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return str(spec["nodeName"])
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    for term in required.get("nodeSelectorTerms") or []:
        for field in term.get("matchFields") or []:
            if field.get("key") == "metadata.name" and field.get("operator") == "In" and field.get("values"):
                return str(field["values"][0])
    return None


class DaemonSets(Controller[tuple[str, str]]):
    def __init__(self, store: Store, options: SimOptions) -> None:
        super().__init__(store, options)
        self.pods = self.rt("", "v1", "pods")
        self.nodes = self.rt("", "v1", "nodes")
        self.daemonsets = self.rt("apps", "v1", "daemonsets")
        self.by_uid: dict[str, tuple[str, str]] = {}
        self.pods_of: dict[str, set[tuple[str, str]]] = defaultdict(set)  # DaemonSet uid -> its pods

    def on_event(self, event: Event) -> bool:
        meta = event.obj["metadata"]
        if event.rt is self.daemonsets:
            key = (meta.get("namespace", ""), meta["name"])
            if event.type == "DELETED":
                self.by_uid.pop(meta["uid"], None)
                return False
            self.by_uid[meta["uid"]] = key
            self.dirty.add(key)
            return True
        if event.rt is self.nodes:
            self.dirty.update(self.by_uid.values())
            return bool(self.by_uid)
        if event.rt is self.pods:
            owner = controller_ref(meta)
            if owner is None or owner.get("kind") != "DaemonSet":
                return False
            pod_key = (meta.get("namespace", ""), meta["name"])
            if event.type == "DELETED":
                self.pods_of[owner["uid"]].discard(pod_key)
            else:
                self.pods_of[owner["uid"]].add(pod_key)
            if owner["uid"] in self.by_uid:
                self.dirty.add(self.by_uid[owner["uid"]])
                return True
        return False

    def reconcile(self, key: tuple[str, str]) -> None:
        namespace, name = key
        ds = self.store.find(self.daemonsets, namespace, name)
        if ds is None or ds["metadata"].get("deletionTimestamp"):
            return
        template = (ds.get("spec") or {}).get("template") or {}
        spec = daemon_pod_spec(template.get("spec") or {})
        pods = [
            pod
            for ns, pod_name in sorted(self.pods_of.get(ds["metadata"]["uid"], ()))
            if (pod := self.store.find(self.pods, ns, pod_name)) is not None
        ]
        by_node: dict[str, list[Obj]] = defaultdict(list)
        for pod in pods:
            failed = (pod.get("status") or {}).get("phase") == "Failed"
            if failed and not pod["metadata"].get("deletionTimestamp"):
                self.store.verbs.delete(
                    self.pods, namespace, pod["metadata"]["name"]
                )  # replaced on the next pass
                continue
            if is_active(pod) and (for_node := pod_node(pod)):
                by_node[for_node].append(pod)
        wanted = 0
        for node in self.store.objects(self.nodes):
            should_run, keep = placement(spec, node)
            wanted += should_run
            running = by_node.pop(node["metadata"]["name"], [])
            if should_run and not running:
                self._create_pod(ds, template, spec=spec, node=node["metadata"]["name"])
            for extra in running[1:] if keep else running:
                self.store.verbs.delete(self.pods, namespace, extra["metadata"]["name"])
        for gone_nodes_pods in by_node.values():  # pods for nodes that no longer exist
            for pod in gone_nodes_pods:
                self.store.verbs.delete(self.pods, namespace, pod["metadata"]["name"])
        self._status(ds, pods, wanted)

    def _create_pod(self, ds: Obj, template: Obj, *, spec: Obj, node: str) -> None:
        meta = copy.deepcopy(template.get("metadata") or {})
        generation = str(ds["metadata"].get("generation", 1))
        meta["labels"] = {
            **(meta.get("labels") or {}),
            "controller-revision-hash": template_hash(template),
            "pod-template-generation": generation,
        }
        meta["ownerReferences"] = [owner_ref(ds)]
        meta["generateName"] = f"{ds['metadata']['name']}-"
        namespace = ds["metadata"]["namespace"]
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pinned_to(spec, node)}
        self.store.verbs.create(self.pods, namespace, body, decoded=True)

    def _status(self, ds: Obj, pods: list[Obj], wanted: int) -> None:
        active = [p for p in pods if is_active(p)]
        placed = [p for p in active if (p.get("spec") or {}).get("nodeName")]
        ready = sum(1 for p in placed if is_ready(p))
        values = {
            "desiredNumberScheduled": wanted,
            "currentNumberScheduled": len(placed),
            "updatedNumberScheduled": len(placed),
            "numberMisscheduled": 0,
            "numberReady": ready,
            "numberAvailable": ready,
            "observedGeneration": ds["metadata"].get("generation", 1),
        }
        status = ds.get("status") or {}
        if all(status.get(k) == v for k, v in values.items()):
            return
        new = copy.deepcopy(ds)
        new["status"] = {**status, **values}
        self.store.put(self.daemonsets, new, "MODIFIED", old=ds)
