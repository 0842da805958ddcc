"""kube-controller-manager's volume controllers, for what pins a pod: the PersistentVolume binder (a claim
bound to the smallest available volume that satisfies it, or to one its class's provisioner makes; a claim
of a `WaitForFirstConsumer` class only once the scheduler has chosen its pod's node), the reclaim of a
volume whose claim is gone (`Delete`: the volume goes; `Retain`: it is `Released`), and the protection
controllers (a claim in use by a pod, or a bound volume, is not removed until that ends).

`VolumeBinder` makes the binding writes, for this controller and for the scheduler, which binds a delayed
claim on the node it chose before it binds the pod (kube-scheduler's VolumeBinding PreBind)."""

from __future__ import annotations

import copy

from kubesim.apiserver.records import Event, Obj
from kubesim.apiserver.storage import PV_PROTECTION, PVC_PROTECTION, STORAGE_GROUP
from kubesim.apiserver.store import Store
from kubesim.controllers import volume_rules as rules
from kubesim.controllers.base import Controller
from kubesim.controllers.recorder import record_event
from kubesim.options import SimOptions

TERMINAL = frozenset({"Succeeded", "Failed"})
BOUND_BY_CONTROLLER, BIND_COMPLETED = (
    "pv.kubernetes.io/bound-by-controller",
    "pv.kubernetes.io/bind-completed",
)
STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"


class VolumeBinder:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.claims_rt = store.registry.core("persistentvolumeclaims")
        self.volumes_rt = store.registry.core("persistentvolumes")
        classes = store.registry.get(STORAGE_GROUP, "v1", "storageclasses")
        assert classes is not None
        self.classes_rt = classes
        self.nodes_rt = store.registry.core("nodes")

    def storage_class(self, name: str) -> Obj | None:
        return self.store.find(self.classes_rt, "", name) if name else None

    def volumes(self) -> list[Obj]:
        return list(self.store.objects(self.volumes_rt))

    def available_for(self, claims: list[rules.Claim]) -> list[Obj]:
        """The volumes a delayed one of these claims may bind to (none read when no claim is delayed)."""
        return self.volumes() if any(c.delayed for c in claims) else []

    def claims_of(self, pod: Obj) -> list[rules.Claim] | str:
        """The pod's claims with their volumes and classes, or why no node can take it."""
        if not rules.claim_names(pod):
            return []
        namespace = pod["metadata"].get("namespace", "")
        return rules.pod_claims(
            pod,
            claim=lambda name: self.store.find(self.claims_rt, namespace, name),
            volume=lambda name: self.store.find(self.volumes_rt, "", name),
            storage_class=self.storage_class,
        )

    def bind_on(self, claims: list[rules.Claim], node: Obj) -> None:
        """Bind each delayed claim on the chosen node: to a volume it reaches, else to one made there."""
        taken: set[str] = set()
        for c in claims:
            if not c.delayed:
                continue
            volume = rules.matching_volume(c.claim, self.volumes(), node=node, taken=taken)
            if volume is None and c.storage_class is not None:
                volume = self.provision(c.claim, c.storage_class, node)
            if volume is not None:
                taken.add(volume["metadata"]["name"])
                self.bind(c.claim, volume)

    def provision(self, claim: Obj, storage_class: Obj, node: Obj | None) -> Obj:
        body = rules.provisioned(claim, storage_class, node)
        return self.store.verbs.create(self.volumes_rt, "", body, decoded=True)

    def bind(self, claim: Obj, volume: Obj) -> None:
        """Bind the claim and the volume to each other, both sides, as the binder's bind does."""
        new_volume = copy.deepcopy(volume)
        vspec = new_volume["spec"]
        if not rules.claimed(vspec.get("claimRef"), claim):
            vspec["claimRef"] = rules.claim_reference(claim)
            new_volume["metadata"].setdefault("annotations", {})[BOUND_BY_CONTROLLER] = "yes"
        new_volume.setdefault("status", {})["phase"] = "Bound"
        self.store.put(self.volumes_rt, new_volume, "MODIFIED", old=volume)
        new_claim = copy.deepcopy(claim)
        annotations = new_claim["metadata"].setdefault("annotations", {})
        if not claim["spec"].get("volumeName"):
            new_claim["spec"]["volumeName"] = volume["metadata"]["name"]
            annotations[BOUND_BY_CONTROLLER] = "yes"
        annotations[BIND_COMPLETED] = "yes"
        provisioner = (volume["metadata"].get("annotations") or {}).get("pv.kubernetes.io/provisioned-by")
        if provisioner:
            annotations[STORAGE_PROVISIONER] = provisioner
        new_claim["status"] = {
            **(claim.get("status") or {}),
            "phase": "Bound",
            "accessModes": list(vspec.get("accessModes") or []),
            "capacity": dict(vspec.get("capacity") or {}),
        }
        self.store.put(self.claims_rt, new_claim, "MODIFIED", old=claim)


class Volumes(Controller[tuple[str, str, str]]):
    """Keys: ("claim", namespace, name) and ("volume", "", name)."""

    tick = 1.0

    def __init__(self, store: Store, options: SimOptions) -> None:
        super().__init__(store, options)
        self.binder = VolumeBinder(store)
        self.pods = self.rt("", "v1", "pods")
        self.events_rt = self.rt("", "v1", "events")
        self.waiting: set[tuple[str, str, str]] = set()  # unbound claims, tried again each tick
        self.told: dict[tuple[str, str], str] = {}  # the last event each claim was given

    def on_event(self, event: Event) -> bool:
        rt, meta = event.rt, event.obj["metadata"]
        if rt is self.binder.claims_rt:
            self.dirty.add(("claim", meta.get("namespace", ""), meta["name"]))
            bound = (event.obj.get("spec") or {}).get("volumeName")
            if event.type == "DELETED" and bound:  # its volume is reclaimed
                self.dirty.add(("volume", "", bound))
        elif rt is self.binder.volumes_rt:
            self.dirty.add(("volume", "", meta["name"]))
            ref = (event.obj.get("spec") or {}).get("claimRef") or {}
            if ref.get("name"):
                self.dirty.add(("claim", ref.get("namespace", ""), ref["name"]))
        elif rt is self.pods and (event.type == "DELETED" or _phase(event.obj) in TERMINAL):
            namespace = meta.get("namespace", "")
            self.dirty.update(("claim", namespace, name) for name in rules.claim_names(event.obj))
        else:
            return False
        return True

    def periodic(self) -> None:
        for key in list(self.waiting):
            self.mark(key)

    def reconcile(self, key: tuple[str, str, str]) -> None:
        kind, namespace, name = key
        if kind == "volume":
            self._volume(name)
        else:
            self._claim(namespace, name)

    def _claim(self, namespace: str, name: str) -> None:
        key = ("claim", namespace, name)
        self.waiting.discard(key)
        claim = self.store.find(self.binder.claims_rt, namespace, name)
        if claim is None:
            self.told.pop((namespace, name), None)
            return
        if claim["metadata"].get("deletionTimestamp"):
            if not self._in_use(claim):
                self.drop_finalizer(self.binder.claims_rt, claim, PVC_PROTECTION)
            return
        if (claim.get("status") or {}).get("phase") == "Bound":
            return
        volume = self._volume_for(claim)
        if volume is not None:
            self.binder.bind(claim, volume)
            return
        self.waiting.add(key)

    def _volume_for(self, claim: Obj) -> Obj | None:
        """The volume to bind the claim to now, provisioned if need be; None (with an event saying why)
        while it must wait."""
        spec, meta = claim["spec"], claim["metadata"]
        class_name = spec.get("storageClassName") or ""
        storage_class = self.binder.storage_class(class_name)
        delayed = (storage_class or {}).get("volumeBindingMode") == "WaitForFirstConsumer"
        selected = (meta.get("annotations") or {}).get(rules.SELECTED_NODE)
        if delayed and not selected and not spec.get("volumeName"):
            message = "waiting for first consumer to be created before binding"
            self._tell(claim, "Normal", reason="WaitForFirstConsumer", message=message)
            return None
        node = self.store.find(self.binder.nodes_rt, "", selected) if delayed and selected else None
        volume = rules.matching_volume(claim, self.binder.volumes(), node=node)
        if volume is not None or spec.get("volumeName"):
            return volume
        if storage_class is not None and storage_class.get("provisioner") != rules.NO_PROVISIONER:
            made = self.binder.provision(claim, storage_class, node)
            message = f"Successfully provisioned volume {made['metadata']['name']}"
            self._tell(claim, "Normal", reason="ProvisioningSucceeded", message=message)
            return made
        if class_name and storage_class is None:
            message = f'storageclass.storage.k8s.io "{class_name}" not found'
            self._tell(claim, "Warning", reason="ProvisioningFailed", message=message)
        elif not class_name:
            message = "no persistent volumes available for this claim and no storage class is set"
            self._tell(claim, "Normal", reason="FailedBinding", message=message)
        return None

    def _volume(self, name: str) -> None:
        volume = self.store.find(self.binder.volumes_rt, "", name)
        if volume is None:
            return
        spec, status = volume.get("spec") or {}, volume.get("status") or {}
        ref = spec.get("claimRef")
        claim = self.store.find(self.binder.claims_rt, ref.get("namespace", ""), ref["name"]) if ref else None
        gone = ref is not None and (
            claim is None or ref.get("uid") not in (None, claim["metadata"].get("uid"))
        )
        if volume["metadata"].get("deletionTimestamp"):
            if ref is None or gone:
                self.drop_finalizer(self.binder.volumes_rt, volume, PV_PROTECTION)
            return
        if ref is None:
            phase = "Available"
        elif not gone:
            phase = status.get("phase") or "Pending"
        elif spec.get("persistentVolumeReclaimPolicy") == "Delete":
            self.store.verbs.delete(self.binder.volumes_rt, "", name)
            return
        else:
            phase = "Released"
        if phase != status.get("phase"):
            new = copy.deepcopy(volume)
            new.setdefault("status", {})["phase"] = phase
            self.store.put(self.binder.volumes_rt, new, "MODIFIED", old=volume)

    def _in_use(self, claim: Obj) -> bool:
        namespace, name = claim["metadata"].get("namespace", ""), claim["metadata"]["name"]
        return any(
            _phase(pod) not in TERMINAL and name in rules.claim_names(pod)
            for pod in self.store.objects(self.pods, namespace)
        )

    def _tell(self, claim: Obj, kind: str, *, reason: str, message: str) -> None:
        """One event per claim for each reason it waits (a real controller repeats it, counted)."""
        meta = claim["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        if self.told.get(key) == reason:
            return
        self.told[key] = reason
        if self.options.record_events:
            record_event(
                self.store,
                self.events_rt,
                claim,
                kind=kind,
                reason=reason,
                message=message,
                component="persistentvolume-controller",
            )


def _phase(obj: Obj) -> str | None:
    phase = (obj.get("status") or {}).get("phase")
    return str(phase) if phase is not None else None
