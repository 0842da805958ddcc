"""What a pod's PersistentVolumeClaims allow, decided as kube-scheduler's VolumeBinding and VolumeZone
plugins and the PersistentVolume controller decide it (pure: the objects are looked up by the caller).

A claim bound to a volume pins the pod to the nodes the volume's `nodeAffinity` and zone labels allow; an
unbound claim of a `WaitForFirstConsumer` class is bound when the pod is scheduled, to an available volume
that node can reach or to one provisioned for it; an unbound claim of an `Immediate` class keeps the pod
from scheduling until the controller binds it."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kubesim.apiserver.records import Obj
from kubesim.apiserver.selectors import match_label_selector
from kubesim.controllers.node_filters import matches_terms
from shared.api.quantity import milli

# kube-scheduler's words (volumebinding, volumezone).
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
NODE_CONFLICT = "node(s) had volume node affinity conflict"
PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
ZONE_CONFLICT = "node(s) had no available volume zone"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
ZONE, REGION = "topology.kubernetes.io/zone", "topology.kubernetes.io/region"
ZONE_LABELS = (
    ZONE,
    REGION,
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
)
HOSTNAME = "kubernetes.io/hostname"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
SELECTED_NODE = "volume.kubernetes.io/selected-node"


@dataclass(frozen=True)
class Claim:
    claim: Obj
    volume: Obj | None  # the volume it is bound to (None: unbound, or bound to one that is gone)
    storage_class: Obj | None
    delayed: bool  # unbound, of a WaitForFirstConsumer class: bound when its pod is scheduled


def claim_names(pod: Obj) -> list[str]:
    """The claims a pod's volumes name: `persistentVolumeClaim.claimName`, and `<pod>-<volume>` for a generic
    ephemeral volume."""
    names = []
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        if "persistentVolumeClaim" in volume:
            names.append(volume["persistentVolumeClaim"].get("claimName", ""))
        elif "ephemeral" in volume:
            names.append(f"{pod['metadata'].get('name', '')}-{volume.get('name', '')}")
    return names


def pod_claims(
    pod: Obj,
    *,
    claim: Callable[[str], Obj | None],
    volume: Callable[[str], Obj | None],
    storage_class: Callable[[str], Obj | None],
) -> list[Claim] | str:
    """The pod's claims, each with its volume and class; or why no node can take the pod (the plugin's
    PreFilter: a claim missing or being deleted, an Immediate claim not yet bound)."""
    found = []
    for name in claim_names(pod):
        obj = claim(name)
        if obj is None:
            return f'persistentvolumeclaim "{name}" not found'
        if obj["metadata"].get("deletionTimestamp"):
            return f'persistentvolumeclaim "{name}" is being deleted'
        spec = obj.get("spec") or {}
        cls = storage_class(spec["storageClassName"]) if spec.get("storageClassName") else None
        bound = spec.get("volumeName")
        delayed = not bound and (cls or {}).get("volumeBindingMode") == "WaitForFirstConsumer"
        if not bound and not delayed:
            return UNBOUND_IMMEDIATE
        found.append(Claim(obj, volume(bound) if bound else None, cls, delayed))
    return found


def node_conflict(claims: list[Claim], node: Obj, volumes: list[Obj]) -> str | None:
    """Why the node cannot take a pod with these claims (VolumeBinding, then VolumeZone); None: it can.
    `volumes`: the volumes a delayed claim may bind to, read once for every node a pod is tried on."""
    taken: set[str] = set()
    for c in claims:
        if c.delayed:
            found = matching_volume(c.claim, volumes, node=node, taken=taken)
            if found is not None:
                taken.add(found["metadata"]["name"])
            elif not can_provision(c.storage_class, node):
                return BIND_CONFLICT
        elif c.volume is None:
            return PV_NOT_EXIST
        elif not reachable(c.volume, node):
            return NODE_CONFLICT
    for c in claims:
        if c.volume is not None and not in_zone(c.volume, node):
            return ZONE_CONFLICT
    return None


def reachable(volume: Obj, node: Obj) -> bool:
    """Whether the volume's required node affinity lets the node use it."""
    terms = (((volume.get("spec") or {}).get("nodeAffinity") or {}).get("required") or {}).get(
        "nodeSelectorTerms"
    )
    return not terms or matches_terms(terms, node)


def in_zone(volume: Obj, node: Obj) -> bool:
    """VolumeZone: each zone or region label of the volume (several values joined by `__`) holds the
    node's value of that label."""
    labels = volume["metadata"].get("labels") or {}
    node_labels = node["metadata"].get("labels") or {}
    for key in ZONE_LABELS:
        if key in labels and node_labels.get(key) not in labels[key].split("__"):
            return False
    return True


def can_provision(storage_class: Obj | None, node: Obj) -> bool:
    """Whether the class's provisioner can make a volume the node reaches (its `allowedTopologies`)."""
    if storage_class is None or storage_class.get("provisioner") in (None, "", NO_PROVISIONER):
        return False
    topologies = storage_class.get("allowedTopologies") or []
    return not topologies or matches_terms(_as_node_terms(topologies), node)


def _as_node_terms(topologies: list[Obj]) -> list[Obj]:
    return [
        {
            "matchExpressions": [
                {"key": e["key"], "operator": "In", "values": e.get("values") or []}
                for e in t.get("matchLabelExpressions") or []
            ]
        }
        for t in topologies
    ]


def matching_volume(
    claim: Obj, volumes: Iterable[Obj], *, node: Obj | None = None, taken: set[str] | None = None
) -> Obj | None:
    """The smallest available volume that satisfies the claim (its class, access modes, size, volume mode
    and selector; the volume it names, if it names one; one already promised to it first), reachable from
    `node` if given."""
    spec = claim.get("spec") or {}
    want = milli(((spec.get("resources") or {}).get("requests") or {}).get("storage", "0"))
    modes = set(spec.get("accessModes") or [])
    best: tuple[int, int, str, Obj] | None = None
    for volume in volumes:
        vspec, meta = volume.get("spec") or {}, volume["metadata"]
        if spec.get("volumeName") and meta["name"] != spec["volumeName"]:
            continue
        promised = claimed(vspec.get("claimRef"), claim)
        if meta.get("deletionTimestamp") or (vspec.get("claimRef") and not promised):
            continue
        if (volume.get("status") or {}).get("phase") not in ("Available", "Pending", None) and not promised:
            continue
        have = milli((vspec.get("capacity") or {}).get("storage", "0"))
        if (
            (vspec.get("storageClassName") or "") != (spec.get("storageClassName") or "")
            or not modes <= set(vspec.get("accessModes") or [])
            or have < want
            or vspec.get("volumeMode", "Filesystem") != spec.get("volumeMode", "Filesystem")
            or (spec.get("selector") and not match_label_selector(spec["selector"], meta.get("labels") or {}))
            or meta["name"] in (taken or set())
            or (node is not None and not reachable(volume, node))
        ):
            continue
        rank = (0 if promised else 1, have, meta["name"], volume)
        if best is None or rank[:3] < best[:3]:
            best = rank
    return best[3] if best else None


def claimed(ref: Obj | None, claim: Obj) -> bool:
    meta = claim["metadata"]
    return bool(
        ref
        and ref.get("name") == meta["name"]
        and ref.get("namespace") == meta.get("namespace")
        and ref.get("uid") in (None, "", meta.get("uid"))
    )


def provisioned(claim: Obj, storage_class: Obj, node: Obj | None) -> Obj:
    """The volume the class's provisioner makes for the claim, named `pvc-<claim uid>` as the external
    provisioner names it; confined to the node's zone (or the node, where it has no zone), or to the
    class's first allowed topology when no node was chosen (Immediate)."""
    spec, meta = claim.get("spec") or {}, claim["metadata"]
    provisioner = storage_class["provisioner"]
    name = f"pvc-{meta['uid']}"
    vspec: Obj = {
        "accessModes": list(spec.get("accessModes") or []),
        "capacity": {"storage": ((spec.get("resources") or {}).get("requests") or {}).get("storage")},
        "claimRef": claim_reference(claim),
        "csi": {"driver": provisioner, "volumeHandle": name, "fsType": "ext4"},
        "persistentVolumeReclaimPolicy": storage_class.get("reclaimPolicy") or "Delete",
        "storageClassName": storage_class["metadata"]["name"],
        "volumeMode": spec.get("volumeMode") or "Filesystem",
    }
    if terms := _topology(storage_class, node):
        vspec["nodeAffinity"] = {"required": {"nodeSelectorTerms": terms}}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "annotations": {"pv.kubernetes.io/provisioned-by": provisioner}},
        "spec": vspec,
    }


def _topology(storage_class: Obj, node: Obj | None) -> list[Obj]:
    topologies = storage_class.get("allowedTopologies") or []
    if node is None:
        return _as_node_terms(topologies[:1]) if topologies else []
    labels = node["metadata"].get("labels") or {}
    keys = [e["key"] for t in topologies[:1] for e in t.get("matchLabelExpressions") or []]
    if not keys:
        keys = [ZONE] if ZONE in labels else [HOSTNAME]
    values = {key: labels.get(key, node["metadata"]["name"] if key == HOSTNAME else "") for key in keys}
    return [{"matchExpressions": [{"key": k, "operator": "In", "values": [v]} for k, v in values.items()]}]


def claim_reference(claim: Obj) -> Obj:
    """The `claimRef` a volume bound to the claim carries."""
    meta = claim["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "namespace": meta.get("namespace"),
        "name": meta["name"],
        "uid": meta.get("uid"),
        "resourceVersion": meta.get("resourceVersion"),
    }
