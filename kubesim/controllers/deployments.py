"""The deployment controller's pass over one Deployment (for kubesim.controllers.workloads): its
ReplicaSet for the current template (created, or found by the template's hash), revisions as the deployment
controller numbers them, a Recreate or a rolling update within maxSurge / maxUnavailable, and the status
counts."""

from __future__ import annotations

import copy

from kubesim.apiserver.records import Obj
from kubesim.controllers.owned import Workloads, desired, owner_ref, template_hash
from shared.api.intstr import scaled_value

REVISION = "deployment.kubernetes.io/revision"
REVISION_HISTORY = "deployment.kubernetes.io/revision-history"
CHANGE_CAUSE = "kubernetes.io/change-cause"


def reconcile_deployment(w: Workloads, namespace: str, name: str) -> None:
    found = desired(w, w.deployments, namespace, name=name)
    if found is None:
        return
    deploy, spec, replicas, template = found
    tmpl_hash = template_hash(template)
    sets = w._children(deploy, w.replicasets)
    new_rs = next(
        (r for r in sets if (r["metadata"].get("labels") or {}).get("pod-template-hash") == tmpl_hash),
        None,
    )
    old_sets = sorted((r for r in sets if r is not new_rs), key=_created_order)
    if new_rs is None:
        first = not any(int((r.get("spec") or {}).get("replicas", 0)) for r in old_sets)
        new_rs = _create_rs(w, deploy, template, tmpl_hash=tmpl_hash, replicas=replicas if first else 0)
    new_rs = _revise(w, deploy, new_rs, old_sets=old_sets)
    strategy = spec.get("strategy") or {}
    if strategy.get("type") == "Recreate":
        if any(_rs_pods(w, r) for r in old_sets):
            for rs in old_sets:
                _scale(w, rs, 0)
        else:
            _scale(w, new_rs, replicas)
    else:
        rolling = strategy.get("rollingUpdate") or {}
        surge = scaled_value(rolling.get("maxSurge", "25%"), replicas, round_up=True)
        unavailable = scaled_value(rolling.get("maxUnavailable", "25%"), replicas, round_up=False)
        if surge == 0 and unavailable == 0:
            unavailable = 1
        new_count = int(new_rs["spec"].get("replicas", 0))
        total = new_count + sum(int(r["spec"].get("replicas", 0)) for r in old_sets)
        if new_count > replicas:
            _scale(w, new_rs, replicas)
        elif new_count < replicas and total < replicas + surge:
            _scale(w, new_rs, min(replicas, new_count + replicas + surge - total))
        available = sum(int((r.get("status") or {}).get("availableReplicas", 0)) for r in [new_rs, *old_sets])
        can_remove = available - (replicas - unavailable)
        for rs in old_sets:
            current = int(rs["spec"].get("replicas", 0))
            unhealthy = current - int((rs.get("status") or {}).get("availableReplicas", 0))
            cut = min(current, max(0, unhealthy) + max(0, can_remove))
            if cut > 0:
                _scale(w, rs, current - cut)
                can_remove -= max(0, cut - max(0, unhealthy))
    sets = w._children(deploy, w.replicasets)
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
    w._status(
        w.deployments,
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


def _revise(w: Workloads, deploy: Obj, new_rs: Obj, *, old_sets: list[Obj]) -> Obj:
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
        w.store.put(w.replicasets, new, "MODIFIED", old=new_rs)
        new_rs = new
    revision = new_rs["metadata"]["annotations"][REVISION]
    if (deploy["metadata"].get("annotations") or {}).get(REVISION) != revision:
        marked = copy.deepcopy(deploy)
        marked["metadata"].setdefault("annotations", {})[REVISION] = revision
        w.store.put(w.deployments, marked, "MODIFIED", old=deploy)
    return new_rs


def _rs_pods(w: Workloads, rs: Obj) -> int:
    return len([p for p in w._children(rs, w.pods) if not p["metadata"].get("deletionTimestamp")])


def _create_rs(w: Workloads, deploy: Obj, template: Obj, *, tmpl_hash: str, replicas: int) -> Obj:
    tmpl = copy.deepcopy(template)
    tmpl.setdefault("metadata", {}).setdefault("labels", {})["pod-template-hash"] = tmpl_hash
    selector = copy.deepcopy(deploy["spec"].get("selector") or {})
    selector.setdefault("matchLabels", {})["pod-template-hash"] = tmpl_hash
    labels = {**(tmpl["metadata"].get("labels") or {})}
    return w.store.verbs.create(
        w.replicasets,
        deploy["metadata"]["namespace"],
        {
            "metadata": {
                "name": f"{deploy['metadata']['name']}-{tmpl_hash}",
                "labels": labels,
                "ownerReferences": [owner_ref(deploy)],
            },
            "spec": {"replicas": replicas, "selector": selector, "template": tmpl},
        },
        decoded=True,
    )


def _scale(w: Workloads, rs: Obj, replicas: int) -> None:
    if int(rs["spec"].get("replicas", 0)) == replicas:
        return
    new = copy.deepcopy(rs)
    new["spec"]["replicas"] = replicas
    new["metadata"]["generation"] = rs["metadata"].get("generation", 1) + 1
    w.store.put(w.replicasets, new, "MODIFIED", old=rs)


def _created_order(obj: Obj) -> tuple[str, int]:
    return (obj["metadata"].get("creationTimestamp", ""), int(obj["metadata"].get("resourceVersion", "0")))


def revision_of(rs: Obj) -> int:
    try:
        return int((rs["metadata"].get("annotations") or {}).get(REVISION, 0))
    except ValueError:
        return 0
