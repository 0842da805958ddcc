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

from kubesim.controllers import scale_down
from kubesim.controllers.base import Controller
from kubesim.controllers.owned import is_active, is_ready, owner_ref, template_hash
from kubesim.controllers.statefulsets import reconcile_statefulset
from kubesim.options import SimOptions
from kubesim.records import Event, Obj
from kubesim.selectors import match_label_selector
from kubesim.store import Store
from shared.intstr import scaled_value

REVISION = "deployment.kubernetes.io/revision"
REVISION_HISTORY = "deployment.kubernetes.io/revision-history"
CHANGE_CAUSE = "kubernetes.io/change-cause"


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
        controller = next((r for r in meta.get("ownerReferences") or [] if r.get("controller")), None)
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
            self._deployment(namespace, name)
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
                self.store.delete(self.pods, namespace, pod["metadata"]["name"])
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
        self.store.create(
            self.pods,
            owner["metadata"]["namespace"],
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": meta,
                "spec": copy.deepcopy(template.get("spec") or {}),
            },
        )

    def _status(self, rt: Any, obj: Obj, values: dict[str, Any]) -> None:
        status = obj.get("status") or {}
        if all(status.get(k) == v for k, v in values.items()):
            return
        new = copy.deepcopy(obj)
        new["status"] = {**status, **values}
        self.store.put(rt, new, "MODIFIED", old=obj)

    def _deployment(self, namespace: str, name: str) -> None:
        deploy = self.store.find(self.deployments, namespace, name)
        if deploy is None or deploy["metadata"].get("deletionTimestamp"):
            return
        spec = deploy.get("spec") or {}
        replicas = int(spec.get("replicas", 1))
        template = spec.get("template") or {}
        tmpl_hash = template_hash(template)
        sets = self._children(deploy, self.replicasets)
        new_rs = next(
            (r for r in sets if (r["metadata"].get("labels") or {}).get("pod-template-hash") == tmpl_hash),
            None,
        )
        old_sets = sorted((r for r in sets if r is not new_rs), key=_created_order)
        if new_rs is None:
            first = not any(int((r.get("spec") or {}).get("replicas", 0)) for r in old_sets)
            new_rs = self._create_rs(deploy, template, tmpl_hash, replicas=replicas if first else 0)
        new_rs = self._revise(deploy, new_rs, old_sets)
        strategy = spec.get("strategy") or {}
        if strategy.get("type") == "Recreate":
            if any(self._rs_pods(r) for r in old_sets):
                for rs in old_sets:
                    self._scale(rs, 0)
            else:
                self._scale(new_rs, replicas)
        else:
            rolling = strategy.get("rollingUpdate") or {}
            surge = scaled_value(rolling.get("maxSurge", "25%"), replicas, round_up=True)
            unavailable = scaled_value(rolling.get("maxUnavailable", "25%"), replicas, round_up=False)
            if surge == 0 and unavailable == 0:
                unavailable = 1
            new_count = int(new_rs["spec"].get("replicas", 0))
            total = new_count + sum(int(r["spec"].get("replicas", 0)) for r in old_sets)
            if new_count > replicas:
                self._scale(new_rs, replicas)
            elif new_count < replicas and total < replicas + surge:
                self._scale(new_rs, min(replicas, new_count + replicas + surge - total))
            available = sum(
                int((r.get("status") or {}).get("availableReplicas", 0)) for r in [new_rs, *old_sets]
            )
            can_remove = available - (replicas - unavailable)
            for rs in old_sets:
                current = int(rs["spec"].get("replicas", 0))
                unhealthy = current - int((rs.get("status") or {}).get("availableReplicas", 0))
                cut = min(current, max(0, unhealthy) + max(0, can_remove))
                if cut > 0:
                    self._scale(rs, current - cut)
                    can_remove -= max(0, cut - max(0, unhealthy))
        sets = self._children(deploy, self.replicasets)
        statuses = [r.get("status") or {} for r in sets]
        new_status = next(
            (
                (r.get("status") or {})
                for r in sets
                if (r["metadata"].get("labels") or {}).get("pod-template-hash") == tmpl_hash
            ),
            {},
        )
        available = sum(int(s.get("availableReplicas", 0)) for s in statuses)
        self._status(
            self.deployments,
            deploy,
            {
                "replicas": sum(int(s.get("replicas", 0)) for s in statuses),
                "updatedReplicas": int(new_status.get("replicas", 0)),
                "readyReplicas": sum(int(s.get("readyReplicas", 0)) for s in statuses),
                "availableReplicas": available,
                "unavailableReplicas": max(0, replicas - available),
                "observedGeneration": deploy["metadata"].get("generation", 1),
            },
        )

    def _revise(self, deploy: Obj, new_rs: Obj, old_sets: list[Obj]) -> Obj:
        """The deployment controller's revisions: the current ReplicaSet has the highest (one more than any
        other's, so a rollback to an old template gets a new number), and the Deployment names it."""
        latest = max((revision_of(r) for r in old_sets), default=0)
        if revision_of(new_rs) <= latest or not revision_of(new_rs):
            new = copy.deepcopy(new_rs)
            annotations = new["metadata"].setdefault("annotations", {})
            if revision_of(new_rs):
                history = [h for h in annotations.get(REVISION_HISTORY, "").split(",") if h]
                annotations[REVISION_HISTORY] = ",".join([*history, str(revision_of(new_rs))])
            annotations[REVISION] = str(latest + 1)
            cause = (deploy["metadata"].get("annotations") or {}).get(CHANGE_CAUSE)
            if cause:
                annotations[CHANGE_CAUSE] = cause
            self.store.put(self.replicasets, new, "MODIFIED", old=new_rs)
            new_rs = new
        revision = new_rs["metadata"]["annotations"][REVISION]
        if (deploy["metadata"].get("annotations") or {}).get(REVISION) != revision:
            marked = copy.deepcopy(deploy)
            marked["metadata"].setdefault("annotations", {})[REVISION] = revision
            self.store.put(self.deployments, marked, "MODIFIED", old=deploy)
        return new_rs

    def _rs_pods(self, rs: Obj) -> int:
        return len([p for p in self._children(rs, self.pods) if not p["metadata"].get("deletionTimestamp")])

    def _create_rs(self, deploy: Obj, template: Obj, tmpl_hash: str, *, replicas: int) -> Obj:
        tmpl = copy.deepcopy(template)
        tmpl.setdefault("metadata", {}).setdefault("labels", {})["pod-template-hash"] = tmpl_hash
        selector = copy.deepcopy(deploy["spec"].get("selector") or {})
        selector.setdefault("matchLabels", {})["pod-template-hash"] = tmpl_hash
        labels = {**(tmpl["metadata"].get("labels") or {})}
        return self.store.create(
            self.replicasets,
            deploy["metadata"]["namespace"],
            {
                "metadata": {
                    "name": f"{deploy['metadata']['name']}-{tmpl_hash}",
                    "labels": labels,
                    "ownerReferences": [owner_ref(deploy)],
                },
                "spec": {"replicas": replicas, "selector": selector, "template": tmpl},
            },
        )

    def _scale(self, rs: Obj, replicas: int) -> None:
        if int(rs["spec"].get("replicas", 0)) == replicas:
            return
        new = copy.deepcopy(rs)
        new["spec"]["replicas"] = replicas
        new["metadata"]["generation"] = rs["metadata"].get("generation", 1) + 1
        self.store.put(self.replicasets, new, "MODIFIED", old=rs)


def _related_pods(w: Workloads, rs: Obj) -> list[Obj]:
    """The pods of every ReplicaSet with the same controller as `rs` (its Deployment's), `rs`'s too."""
    owner = next((r for r in rs["metadata"].get("ownerReferences") or [] if r.get("controller")), None)
    if owner is None:
        return w._children(rs, w.pods)
    siblings = [w.store.find(w.replicasets, ns, name) for ns, name in w.owned.get(owner["uid"], ())]
    return [p for sibling in siblings if sibling is not None for p in w._children(sibling, w.pods)]


def _created_order(obj: Obj) -> tuple[str, int]:
    return (obj["metadata"].get("creationTimestamp", ""), int(obj["metadata"].get("resourceVersion", "0")))


def selects(selector: Obj | None, obj: Obj) -> bool:
    return match_label_selector(selector, obj["metadata"].get("labels") or {})


__all__ = ["SimOptions", "Workloads", "is_ready", "selects"]


def revision_of(rs: Obj) -> int:
    try:
        return int((rs["metadata"].get("annotations") or {}).get(REVISION, 0))
    except ValueError:
        return 0
