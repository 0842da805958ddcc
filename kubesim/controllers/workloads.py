"""Workload controllers: Deployment -> ReplicaSet -> pods, and StatefulSet -> pods.

Deleted pods are replaced; a template change rolls out within maxSurge / maxUnavailable (Deployment) or one
pod at a time from the highest ordinal (StatefulSet); scaling up and down follows `spec.replicas`. A
StatefulSet's replacement keeps its name, so it is created only once the old pod is fully gone.
"""

from __future__ import annotations

import copy
import time
from collections import defaultdict
from typing import Any

from kubesim.apiserver.records import Event, Obj, controller_ref
from kubesim.apiserver.selectors import match_label_selector
from kubesim.apiserver.store import Store
from kubesim.controllers import scale_down
from kubesim.controllers.base import Controller
from kubesim.controllers.deployments import reconcile_deployment
from kubesim.controllers.owned import is_active, is_ready, owner_ref
from kubesim.controllers.statefulsets import reconcile_statefulset
from kubesim.options import SimOptions


class Workloads(Controller[tuple[str, str, str]]):
    tick = 0.5

    def __init__(self, store: Store, options: SimOptions) -> None:
        super().__init__(store, options)
        self.pods = self.rt("", "v1", "pods")
        self.deployments = self.rt("apps", "v1", "deployments")
        self.replicasets = self.rt("apps", "v1", "replicasets")
        self.rcs = self.rt("", "v1", "replicationcontrollers")  # kept as ReplicaSets are
        self.statefulsets = self.rt("apps", "v1", "statefulsets")
        self.kinds = (self.pods, self.replicasets, self.rcs, self.deployments, self.statefulsets)
        # owner uid -> keys of the objects it controls
        self.owned: dict[str, set[tuple[str, str]]] = defaultdict(set)
        self._owner_of: dict[tuple[str, str, str], str] = {}
        self._by_uid: dict[str, tuple[str, str, str]] = {}

    def on_event(self, event: Event) -> bool:
        rt = event.rt
        if not any(rt is kind for kind in self.kinds):
            return False
        meta = event.obj["metadata"]
        key = (rt.plural, meta.get("namespace", ""), meta["name"])
        if rt is not self.pods:
            if event.type == "DELETED":
                self._by_uid.pop(meta["uid"], None)
            else:
                self._by_uid[meta["uid"]] = key
        controller = controller_ref(meta)
        old_owner = self._owner_of.pop(key, None)
        if old_owner:
            self.owned[old_owner].discard(key[1:])
        if controller and event.type != "DELETED":
            self._owner_of[key] = controller["uid"]
            self.owned[controller["uid"]].add(key[1:])
        if rt is not self.pods:
            self.dirty.add(key)
        for uid in {old_owner, controller and controller["uid"]}:
            if uid and uid in self._by_uid:
                self.dirty.add(self._by_uid[uid])
        return True

    def reconcile(self, key: tuple[str, str, str]) -> None:
        plural, namespace, name = key
        if plural == "replicasets":
            self._replicaset(namespace, name)
        elif plural == "replicationcontrollers":
            self._replicaset(namespace, name, self.rcs)
        elif plural == "deployments":
            reconcile_deployment(self, namespace, name)
        elif plural == "statefulsets":
            reconcile_statefulset(self, namespace, name)

    def _children(self, owner: Obj, rt: Any) -> list[Obj]:
        namespace = owner["metadata"]["namespace"]
        out = []
        for ns, name in self.owned.get(owner["metadata"]["uid"], ()):
            obj = self.store.find(rt, ns, name) if ns == namespace else None
            if obj is not None:
                out.append(obj)
        return out

    def _replicaset(self, namespace: str, name: str, rt: Any = None) -> None:
        rt = rt or self.replicasets
        rs = self.store.find(rt, namespace, name)
        if rs is None or rs["metadata"].get("deletionTimestamp"):
            return
        pods = [p for p in self._children(rs, self.pods) if is_active(p)]
        wanted = int((rs.get("spec") or {}).get("replicas", 1))
        if len(pods) < wanted:
            for _ in range(wanted - len(pods)):
                self._create_pod(rs, rs["spec"]["template"], generate=f"{name}-")
        elif len(pods) > wanted:
            for pod in scale_down.victims(
                pods, _related_pods(self, rs), count=len(pods) - wanted, now=time.time()
            ):
                self.store.verbs.delete(self.pods, namespace, pod["metadata"]["name"])
        pods = [p for p in self._children(rs, self.pods) if is_active(p)]
        ready = sum(1 for p in pods if is_ready(p))
        self._status(
            rt,
            rs,
            {
                "replicas": len(pods),
                "fullyLabeledReplicas": len(pods),
                "readyReplicas": ready,
                "availableReplicas": ready,
                "observedGeneration": rs["metadata"].get("generation", 1),
            },
        )

    def _create_pod(
        self,
        owner: Obj,
        template: Obj,
        generate: str | None = None,
        *,
        name: str | None = None,
        extra_labels: dict[str, str] | None = None,
    ) -> None:
        meta = copy.deepcopy(template.get("metadata") or {})
        meta["labels"] = {**(meta.get("labels") or {}), **(extra_labels or {})}
        meta["ownerReferences"] = [owner_ref(owner)]
        meta["namespace"] = owner["metadata"]["namespace"]
        if name:
            meta["name"] = name
        else:
            meta["generateName"] = generate
        self.store.verbs.create(
            self.pods,
            owner["metadata"]["namespace"],
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": meta,
                "spec": copy.deepcopy(template.get("spec") or {}),
            },
            decoded=True,
        )

    def _status(self, rt: Any, obj: Obj, values: dict[str, Any]) -> None:
        status = obj.get("status") or {}
        if all(status.get(k) == v for k, v in values.items()):
            return
        new = copy.deepcopy(obj)
        new["status"] = {**status, **values}
        self.store.put(rt, new, "MODIFIED", old=obj)


def _related_pods(w: Workloads, rs: Obj) -> list[Obj]:
    """The pods of every ReplicaSet with the same controller as `rs` (its Deployment's), `rs`'s too."""
    owner = controller_ref(rs["metadata"])
    if owner is None:
        return w._children(rs, w.pods)
    siblings = [w.store.find(w.replicasets, ns, name) for ns, name in w.owned.get(owner["uid"], ())]
    return [p for sibling in siblings if sibling is not None for p in w._children(sibling, w.pods)]


def selects(selector: Obj | None, obj: Obj) -> bool:
    return match_label_selector(selector, obj["metadata"].get("labels") or {})


__all__ = ["SimOptions", "Workloads", "is_ready", "selects"]
