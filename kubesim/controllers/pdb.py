"""The PodDisruptionBudget controller: keeps `status` current, which the eviction subresource relies on.

expectedPods comes from the scale of the pods' controllers (as Kubernetes computes it), else the number of
matching pods; currentHealthy counts Ready pods not being deleted and not just disrupted; desiredHealthy is
minAvailable, or expectedPods - maxUnavailable (percentages rounded up); disruptionsAllowed is
currentHealthy - desiredHealthy, never below 0. Entries in `disruptedPods` (written by evictions) leave when
the pod is seen deleted, or after two minutes.
"""

from __future__ import annotations

import copy
import time

from kubesim.apiserver.records import Event, Obj, controller_ref, now_iso, parse_iso
from kubesim.apiserver.store import Store
from kubesim.controllers.base import Controller
from kubesim.controllers.owned import is_ready
from kubesim.controllers.workloads import selects
from kubesim.options import SimOptions
from shared.api.intstr import scaled_value

DISRUPTION_TIMEOUT = 120.0


class PdbController(Controller[tuple[str, str]]):
    tick = 1.0

    def __init__(self, store: Store, options: SimOptions) -> None:
        super().__init__(store, options)
        self.pods = self.rt("", "v1", "pods")
        self.pdbs = self.rt("policy", "v1", "poddisruptionbudgets")
        self.scalable = [self.rt("apps", "v1", p) for p in ("deployments", "replicasets", "statefulsets")]

    def on_event(self, event: Event) -> bool:
        if event.rt is self.pdbs or event.rt is self.pods or event.rt in self.scalable:
            namespace = event.obj["metadata"].get("namespace", "")
            for pdb in self.store.objects(self.pdbs, namespace):
                self.dirty.add((namespace, pdb["metadata"]["name"]))
            return bool(self.dirty)
        return False

    def periodic(self) -> None:
        for pdb in self.store.objects(self.pdbs):
            if (pdb.get("status") or {}).get("disruptedPods"):
                self.dirty.add((pdb["metadata"]["namespace"], pdb["metadata"]["name"]))

    def reconcile(self, key: tuple[str, str]) -> None:
        namespace, name = key
        pdb = self.store.find(self.pdbs, namespace, name)
        if pdb is None:
            return
        spec = pdb.get("spec") or {}
        selector = spec.get("selector")
        pods = [p for p in self.store.objects(self.pods, namespace) if selects(selector, p)]
        expected = self._expected(pods)
        status = copy.deepcopy(pdb.get("status") or {})
        disrupted = dict(status.get("disruptedPods") or {})
        now = time.time()
        by_name = {p["metadata"]["name"]: p for p in pods}
        for pod_name, stamp in list(disrupted.items()):
            pod = by_name.get(pod_name)
            if (
                pod is None
                or pod["metadata"].get("deletionTimestamp")
                or now - parse_iso(stamp) > DISRUPTION_TIMEOUT
            ):
                del disrupted[pod_name]
        healthy = sum(
            1
            for p in pods
            if is_ready(p)
            and not p["metadata"].get("deletionTimestamp")
            and p["metadata"]["name"] not in disrupted
        )
        if spec.get("minAvailable") is not None:
            desired = scaled_value(spec["minAvailable"], expected, round_up=True)
        elif spec.get("maxUnavailable") is not None:
            desired = max(0, expected - scaled_value(spec["maxUnavailable"], expected, round_up=True))
        else:
            desired = expected
        allowed = max(0, healthy - desired)
        values = {
            "observedGeneration": pdb["metadata"].get("generation", 1),
            "expectedPods": expected,
            "currentHealthy": healthy,
            "desiredHealthy": desired,
            "disruptionsAllowed": allowed,
        }
        condition = {
            "type": "DisruptionAllowed",
            "status": "True" if allowed > 0 else "False",
            "reason": "SufficientPods" if allowed > 0 else "InsufficientPods",
            "message": "",
            "observedGeneration": pdb["metadata"].get("generation", 1),
        }
        old_condition: dict[str, object] = next(
            (c for c in status.get("conditions") or [] if c.get("type") == "DisruptionAllowed"), {}
        )
        unchanged = (
            all(status.get(k) == v for k, v in values.items())
            and disrupted == (status.get("disruptedPods") or {})
            and {k: old_condition.get(k) for k in condition} == condition
        )
        if unchanged:
            return
        status.update(values)
        if disrupted:
            status["disruptedPods"] = disrupted
        else:
            status.pop("disruptedPods", None)
        if {k: old_condition.get(k) for k in condition} != condition:
            condition["lastTransitionTime"] = now_iso()
            status["conditions"] = [condition]
        new = copy.deepcopy(pdb)
        new["status"] = status
        self.store.put(self.pdbs, new, "MODIFIED", old=pdb)

    def _expected(self, pods: list[Obj]) -> int:
        controllers: dict[str, int] = {}
        bare = 0
        for pod in pods:
            ref = controller_ref(pod["metadata"])
            if ref is None:
                bare += 1
                continue
            if ref["uid"] in controllers:
                continue
            controllers[ref["uid"]] = self._scale_of(ref, pod["metadata"]["namespace"])
        return sum(controllers.values()) + bare

    def _scale_of(self, ref: Obj, namespace: str) -> int:
        for rt in self.scalable:
            if rt.kind == ref.get("kind"):
                owner = self.store.find(rt, namespace, ref["name"])
                if owner is not None:
                    # A ReplicaSet owned by a Deployment counts the Deployment's replicas.
                    parent = next(
                        (r for r in owner["metadata"].get("ownerReferences") or [] if r.get("controller")),
                        None,
                    )
                    if rt.plural == "replicasets" and parent and parent.get("kind") == "Deployment":
                        deploy = self.store.find(self.scalable[0], namespace, parent["name"])
                        if deploy is not None:
                            return int((deploy.get("spec") or {}).get("replicas", 1))
                    return int((owner.get("spec") or {}).get("replicas", 1))
        return 1
