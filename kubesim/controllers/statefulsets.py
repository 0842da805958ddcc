"""The StatefulSet controller's pass over one StatefulSet (for kubesim.controllers.workloads): pods by
ordinal (one at a time under OrderedReady), scale-down from the highest ordinal, a rolling update that
replaces the highest stale pod once all are Ready, and the status counts."""

from __future__ import annotations

import copy

from kubesim.apiserver.records import Obj
from kubesim.controllers.owned import Workloads, desired, is_active, is_ready, template_hash


def reconcile_statefulset(w: Workloads, namespace: str, name: str) -> None:
    found = desired(w, w.statefulsets, namespace, name=name)
    if found is None:
        return
    sts, spec, replicas, template = found
    revision = f"{name}-{template_hash(template)}"
    ordered = spec.get("podManagementPolicy", "OrderedReady") == "OrderedReady"
    pods = {p["metadata"]["name"]: p for p in w._children(sts, w.pods)}
    for ordinal in range(replicas):
        pod_name = f"{name}-{ordinal}"
        pod = pods.get(pod_name)
        if pod is None:
            if w.store.find(w.pods, namespace, pod_name) is not None:
                continue  # a pod of that name not owned by us: leave it alone
            w._create_pod(
                sts,
                _with_claims(w, sts, template, ordinal=ordinal),
                name=pod_name,
                extra_labels={
                    "statefulset.kubernetes.io/pod-name": pod_name,
                    "controller-revision-hash": revision,
                },
            )
            if ordered:
                break
        elif ordered and not (is_ready(pod) and is_active(pod)):
            break
    extra = sorted(
        (p for n, p in pods.items() if _ordinal(n, name) >= replicas),
        key=lambda p: -_ordinal(p["metadata"]["name"], name),
    )
    for pod in extra[:1] if ordered else extra:
        if not pod["metadata"].get("deletionTimestamp"):
            w.store.verbs.delete(w.pods, namespace, pod["metadata"]["name"])
    current = [p for n, p in pods.items() if _ordinal(n, name) < replicas]
    if len(current) == replicas and all(is_ready(p) and is_active(p) for p in current):
        stale = [
            p
            for p in current
            if (p["metadata"].get("labels") or {}).get("controller-revision-hash") != revision
        ]
        if stale:
            victim = max(stale, key=lambda p: _ordinal(p["metadata"]["name"], name))
            w.store.verbs.delete(w.pods, namespace, victim["metadata"]["name"])
    active = [p for p in w._children(sts, w.pods) if is_active(p)]
    ready = sum(1 for p in active if is_ready(p))
    updated = sum(
        1 for p in active if (p["metadata"].get("labels") or {}).get("controller-revision-hash") == revision
    )
    w._status(
        w.statefulsets,
        sts,
        {
            "replicas": len(active),
            "readyReplicas": ready,
            "availableReplicas": ready,
            "currentReplicas": updated,
            "updatedReplicas": updated,
            "currentRevision": revision,
            "updateRevision": revision,
            "observedGeneration": sts["metadata"].get("generation", 1),
        },
    )


def _with_claims(w: Workloads, sts: Obj, template: Obj, *, ordinal: int) -> Obj:
    """The pod template with a volume per `volumeClaimTemplates` entry, its claim
    `<template>-<set>-<ordinal>` made first if it is not there yet (and kept when the pod goes)."""
    claim_templates = sts["spec"].get("volumeClaimTemplates") or []
    if not claim_templates:
        return template
    meta = sts["metadata"]
    selected = (sts["spec"].get("selector") or {}).get("matchLabels") or {}
    claims_rt = w.store.registry.core("persistentvolumeclaims")
    template = copy.deepcopy(template)
    spec = template.setdefault("spec", {})
    for claim_template in claim_templates:
        volume = claim_template["metadata"]["name"]
        claim_name = f"{volume}-{meta['name']}-{ordinal}"
        if w.store.find(claims_rt, meta["namespace"], claim_name) is None:
            claim = copy.deepcopy(claim_template)
            claim["metadata"] = {
                **claim["metadata"],
                "name": claim_name,
                "namespace": meta["namespace"],
                "labels": {**(claim["metadata"].get("labels") or {}), **selected},
            }
            claim.pop("status", None)
            w.store.verbs.create(claims_rt, meta["namespace"], claim, decoded=True)
        kept = [v for v in spec.get("volumes") or [] if v.get("name") != volume]
        spec["volumes"] = [*kept, {"name": volume, "persistentVolumeClaim": {"claimName": claim_name}}]
    return template


def _ordinal(pod_name: str, sts_name: str) -> int:
    suffix = pod_name[len(sts_name) + 1 :]
    return int(suffix) if suffix.isdigit() else -1
