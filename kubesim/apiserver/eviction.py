"""The eviction subresource (policy/v1 Eviction), as the API server's eviction REST handler does it.

- 404 when the pod is gone; 201 and a graceful delete when allowed, after marking the pod with the
  condition `DisruptionTarget` (reason `EvictionByEvictionAPI`), as the PodDisruptionConditions feature does.
- Pods that are Pending, terminal, or already being deleted are evicted without a budget check.
- With more than one PodDisruptionBudget selecting the pod: 500, as Kubernetes refuses to guess.
- A budget with `disruptionsAllowed` 0 answers 429 TooManyRequests naming the budget; otherwise the
  eviction takes one disruption (recorded in `status.disruptedPods`) before the pod is deleted, so two
  concurrent evictions cannot both spend the last one.
- In `evict_in_background` mode (KEP-1397), KubeVirt's eviction interceptor is a validating webhook
  (`kubesim.interceptor`), called before this handler as every admission webhook is.
"""

from __future__ import annotations

import copy
from typing import Any

from kubesim.apiserver.errors import ApiError, bad_request, too_many_requests
from kubesim.apiserver.records import Obj, now_iso
from kubesim.apiserver.selectors import match_label_selector
from kubesim.apiserver.store import Store
from kubesim.options import SimOptions
from shared.api import annotations as known

REQUEST_EVICT_ONLY = known.REQUEST_EVICT_ONLY
EVICTION_IN_PROGRESS = known.EVICTION_IN_PROGRESS


def evict(store: Store, options: SimOptions, namespace: str, *, name: str, body: dict[str, Any]) -> Obj:
    pods = store.registry.get("", "v1", "pods")
    pdbs = store.registry.get("policy", "v1", "poddisruptionbudgets")
    assert pods is not None and pdbs is not None
    pod = store.get(pods, namespace, name)
    delete_options = dict(body.get("deleteOptions") or {})
    dry_run = "All" in (delete_options.get("dryRun") or [])

    phase = (pod.get("status") or {}).get("phase")
    going = bool(pod["metadata"].get("deletionTimestamp"))
    skip_budget = phase in ("Pending", "Succeeded", "Failed") or going
    if not skip_budget:
        labels = pod["metadata"].get("labels") or {}
        matching = [
            pdb
            for pdb in store.objects(pdbs, namespace)
            if match_label_selector((pdb.get("spec") or {}).get("selector"), labels)
        ]
        if len(matching) > 1:
            raise ApiError(
                500,
                "InternalError",
                "This pod has more than one PodDisruptionBudget, which the eviction "
                "subresource does not support.",
            )
        if matching:
            _take_disruption(store, pdbs, matching[0], pod=pod, dry_run=dry_run)
    if not dry_run:
        # As the eviction handler does (addConditionAndDeletePod): the pod is marked as a disruption target
        # in one write, then deleted in another, so a watch sees who ended it.
        store.verbs.patch(pods, namespace, name, apply=_disruption_target, subresource="status")
        store.verbs.delete(pods, namespace, name, options=delete_options)
        uid = pod["metadata"]["uid"]
        record = store.evictions_of_going if going else store.evictions
        record[uid] = record.get(uid, 0) + 1
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


def eviction_body(body: Obj, query_dry_run: list[str], *, namespace: str, name: str) -> Obj:
    """The Eviction as the handler takes it: its name the URL's (400 otherwise), its namespace the
    request's, and the request's `?dryRun` carried into its deleteOptions (refused when the two disagree)."""
    meta = body.get("metadata") or {}
    if meta.get("name") != name:
        raise bad_request("name in URL does not match name in Eviction object")
    if meta.get("namespace") not in (None, "", namespace):
        raise bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    options = dict(body.get("deleteOptions") or {})
    in_body = list(options.get("dryRun") or [])
    if query_dry_run and in_body and query_dry_run != in_body:
        # A plain error in the handler: the API server answers it 500, reason Unknown.
        raise ApiError(
            500,
            "Unknown",
            f"Non-matching dry-run options in request and content: [{' '.join(query_dry_run)}] and "
            f"[{' '.join(in_body)}]",
        )
    if query_dry_run and not in_body:
        options["dryRun"] = query_dry_run
        return {**body, "deleteOptions": options}
    return body


def _disruption_target(obj: Obj) -> Obj:
    status = obj.setdefault("status", {})
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != known.DISRUPTION_TARGET]
    conditions.append(
        {
            "type": known.DISRUPTION_TARGET,
            "status": "True",
            "reason": known.EVICTION_BY_EVICTION_API,
            "message": "Eviction API: evicting",
            "lastTransitionTime": now_iso(),
        }
    )
    status["conditions"] = conditions
    return obj


def _take_disruption(store: Store, pdbs: Any, pdb: Obj, *, pod: Obj, dry_run: bool) -> None:
    status = pdb.get("status") or {}
    pdb_name = pdb["metadata"]["name"]
    if (
        status.get("observedGeneration", 0) < pdb["metadata"].get("generation", 1)
        and "disruptionsAllowed" not in status
    ):
        raise too_many_requests(
            "Cannot evict pod as it would violate the pod's disruption budget.",
            [
                {
                    "reason": "DisruptionBudget",
                    "message": f"The disruption budget {pdb_name} is still being processed by the server.",
                }
            ],
        )
    if int(status.get("disruptionsAllowed", 0)) <= 0:
        raise too_many_requests(
            "Cannot evict pod as it would violate the pod's disruption budget.",
            [
                {
                    "reason": "DisruptionBudget",
                    "message": f"The disruption budget {pdb_name} needs {status.get('desiredHealthy', 0)} "
                    f"healthy pods and has {status.get('currentHealthy', 0)} currently",
                }
            ],
        )
    if dry_run:
        return

    def spend(obj: Obj) -> Obj:
        new_status = copy.deepcopy(obj.get("status") or {})
        new_status["disruptionsAllowed"] = int(new_status.get("disruptionsAllowed", 0)) - 1
        new_status.setdefault("disruptedPods", {})[pod["metadata"]["name"]] = now_iso()
        obj["status"] = new_status
        return obj

    store.verbs.patch(pdbs, pdb["metadata"]["namespace"], pdb_name, apply=spend, subresource="status")
