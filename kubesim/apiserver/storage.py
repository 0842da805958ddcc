"""PersistentVolumeClaims, PersistentVolumes and StorageClasses as kube-apiserver 1.32 takes them: the
defaulting of pkg/apis/core/v1 and pkg/apis/storage/v1, the admission plugins DefaultStorageClass (a claim
that names no class gets the default one) and StorageObjectInUseProtection (the protection finalizers),
and the validation a user most often meets. Binding and provisioning are kubesim.controllers.volumes'."""

from __future__ import annotations

import copy
from collections.abc import Iterable

from kubesim.apiserver.errors import FieldError, invalid_fields, not_supported
from kubesim.apiserver.records import Obj

STORAGE_GROUP = "storage.k8s.io"
DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"
PVC_PROTECTION, PV_PROTECTION = "kubernetes.io/pvc-protection", "kubernetes.io/pv-protection"
ACCESS_MODES = ("ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod")
BINDING_MODES = ("Immediate", "WaitForFirstConsumer")
RECLAIM_POLICIES = ("Delete", "Recycle", "Retain")
# The volume sources a PersistentVolume may name (one of them is required).
PV_SOURCES = frozenset(
    {
        "awsElasticBlockStore", "azureDisk", "azureFile", "cephfs", "cinder", "csi", "fc", "flexVolume",
        "flocker", "gcePersistentDisk", "glusterfs", "hostPath", "iscsi", "local", "nfs",
        "photonPersistentDisk", "portworxVolume", "quobyte", "rbd", "scaleIO", "storageos", "vsphereVolume",
    }
)  # fmt: skip
CLAIM_IMMUTABLE = (
    "spec is immutable after creation except resources.requests"
    " and volumeAttributesClassName for bound claims"
)


def admitted(
    plural: str, obj: Obj, *, old: Obj | None, subresource: str | None, classes: Iterable[Obj]
) -> None:
    """Default, protect and validate a claim, volume or class written whole (not its status)."""
    if subresource is not None:
        return
    name = obj["metadata"]["name"]
    if plural == "persistentvolumeclaims":
        claim_defaults(obj)
        if old is None:
            _default_class(obj, classes)
            _protect(obj, PVC_PROTECTION)
        errors = _claim_errors(obj["spec"], old)
        kind, group = "PersistentVolumeClaim", ""
    elif plural == "persistentvolumes":
        _volume_defaults(obj)
        if old is None:
            _protect(obj, PV_PROTECTION)
        errors = _volume_errors(obj["spec"])
        kind, group = "PersistentVolume", ""
    else:
        obj.setdefault("reclaimPolicy", "Delete")
        obj.setdefault("volumeBindingMode", "Immediate")
        errors = _class_errors(obj, old)
        kind, group = "StorageClass", STORAGE_GROUP
    if errors:
        raise invalid_fields(kind, group, name, errors=errors)


def claim_defaults(claim: Obj) -> None:
    """SetDefaults_PersistentVolumeClaim: a new claim is Pending, its volume a filesystem."""
    claim.setdefault("spec", {}).setdefault("volumeMode", "Filesystem")
    claim.setdefault("status", {}).setdefault("phase", "Pending")


def _volume_defaults(volume: Obj) -> None:
    spec = volume.setdefault("spec", {})
    spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
    spec.setdefault("volumeMode", "Filesystem")
    volume.setdefault("status", {}).setdefault("phase", "Pending")


def _default_class(claim: Obj, classes: Iterable[Obj]) -> None:
    """DefaultStorageClass: a claim whose `storageClassName` is unset (not "") gets the default class, the
    newest of them if several are marked."""
    spec = claim["spec"]
    if "storageClassName" in spec:
        return
    marked = [c for c in classes if (c["metadata"].get("annotations") or {}).get(DEFAULT_CLASS) == "true"]
    if marked:
        newest = max(
            marked, key=lambda c: (c["metadata"].get("creationTimestamp", ""), c["metadata"]["name"])
        )
        spec["storageClassName"] = newest["metadata"]["name"]


def _protect(obj: Obj, finalizer: str) -> None:
    finalizers = obj["metadata"].setdefault("finalizers", [])
    if finalizer not in finalizers:
        finalizers.append(finalizer)


def _access_mode_errors(spec: Obj) -> list[FieldError]:
    modes = spec.get("accessModes") or []
    if not modes:
        return [
            FieldError("FieldValueRequired", "spec.accessModes", None, "at least 1 access mode is required")
        ]
    return [
        not_supported("spec.accessModes", mode, ACCESS_MODES) for mode in modes if mode not in ACCESS_MODES
    ]


def _claim_errors(spec: Obj, old: Obj | None) -> list[FieldError]:
    errors = _access_mode_errors(spec)
    if not ((spec.get("resources") or {}).get("requests") or {}).get("storage"):
        errors.append(FieldError("FieldValueRequired", "spec.resources[storage]"))
    if old is not None and _frozen(spec) != _frozen(old.get("spec") or {}, new=spec):
        errors.append(FieldError("FieldValueForbidden", "spec", None, CLAIM_IMMUTABLE))
    return errors


def _frozen(spec: Obj, *, new: Obj | None = None) -> Obj:
    """A claim's spec less what an update may change: its requests (expansion); its volume name and class
    while unset (binding sets the one, a default class set later the other)."""
    kept = copy.deepcopy(spec)
    kept.get("resources", {}).pop("requests", None)
    if new is not None:
        for key in ("volumeName", "storageClassName"):
            if not spec.get(key) and key in new:
                kept[key] = new[key]
    return kept


def _volume_errors(spec: Obj) -> list[FieldError]:
    errors = _access_mode_errors(spec)
    if not (spec.get("capacity") or {}).get("storage"):
        errors.append(FieldError("FieldValueRequired", "spec.capacity"))
    sources = [key for key in spec if key in PV_SOURCES]
    if not sources:
        errors.append(FieldError("FieldValueRequired", "spec", None, "must specify a volume type"))
    elif len(sources) > 1:
        errors.append(
            FieldError(
                "FieldValueForbidden", f"spec.{sources[1]}", None, "may not specify more than 1 volume type"
            )
        )
    if "local" in sources and not (spec.get("nodeAffinity") or {}).get("required"):
        errors.append(
            FieldError("FieldValueRequired", "spec.nodeAffinity", None, "Local volume requires node affinity")
        )
    policy = spec.get("persistentVolumeReclaimPolicy")
    if policy not in RECLAIM_POLICIES:
        errors.append(not_supported("spec.persistentVolumeReclaimPolicy", policy, RECLAIM_POLICIES))
    return errors


def _class_errors(sc: Obj, old: Obj | None) -> list[FieldError]:
    errors = []
    if not sc.get("provisioner"):
        errors.append(FieldError("FieldValueRequired", "provisioner"))
    mode = sc.get("volumeBindingMode")
    if mode not in BINDING_MODES:
        errors.append(not_supported("volumeBindingMode", mode, BINDING_MODES))
    if old is None:
        return errors
    for key in ("parameters", "provisioner", "reclaimPolicy"):
        if sc.get(key) != old.get(key):
            errors.append(FieldError("FieldValueForbidden", key, None, f"updates to {key} are forbidden."))
    if mode != old.get("volumeBindingMode"):
        errors.append(FieldError("FieldValueInvalid", "volumeBindingMode", mode, "field is immutable"))
    return errors
