"""The API server's printers for PersistentVolumeClaims, PersistentVolumes and StorageClasses: the columns
`kubectl get pvc`, `pv` and `sc` show, and with `-o wide` the ones of priority 1."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubesim.apiserver.records import Obj
from kubesim.apiserver.resources import Column, Printer
from kubesim.apiserver.storage import DEFAULT_CLASS

MODES = {"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX", "ReadWriteOncePod": "RWOP"}

CLAIM_COLUMNS = [
    Column("Name", ".metadata.name"),
    Column("Status", ""),
    Column("Volume", ""),
    Column("Capacity", ""),
    Column("Access Modes", ""),
    Column("StorageClass", ""),
    Column("VolumeAttributesClass", ""),
    Column("Age", ""),
    Column("VolumeMode", "", priority=1),
]


def _modes(modes: list[str] | None) -> str:
    return ",".join(MODES.get(m, m) for m in modes or [])


def claim_cells(claim: Obj, age: Callable[[str | None], str]) -> list[Any]:
    spec, status = claim.get("spec") or {}, claim.get("status") or {}
    bound = bool(spec.get("volumeName"))
    return [
        claim["metadata"]["name"],
        "Terminating" if claim["metadata"].get("deletionTimestamp") else status.get("phase", ""),
        spec.get("volumeName", ""),
        (status.get("capacity") or {}).get("storage", "") if bound else "",
        _modes(status.get("accessModes")) if bound else "",
        spec.get("storageClassName") or "",
        spec.get("volumeAttributesClassName") or "<unset>",
        age(claim["metadata"].get("creationTimestamp")),
        spec.get("volumeMode", "Filesystem"),
    ]


VOLUME_COLUMNS = [
    Column("Name", ".metadata.name"),
    Column("Capacity", ""),
    Column("Access Modes", ""),
    Column("Reclaim Policy", ""),
    Column("Status", ""),
    Column("Claim", ""),
    Column("StorageClass", ""),
    Column("VolumeAttributesClass", ""),
    Column("Reason", ""),
    Column("Age", ""),
    Column("VolumeMode", "", priority=1),
]


def volume_cells(volume: Obj, age: Callable[[str | None], str]) -> list[Any]:
    spec, status = volume.get("spec") or {}, volume.get("status") or {}
    ref = spec.get("claimRef") or {}
    return [
        volume["metadata"]["name"],
        (spec.get("capacity") or {}).get("storage", ""),
        _modes(spec.get("accessModes")),
        spec.get("persistentVolumeReclaimPolicy", ""),
        "Terminating" if volume["metadata"].get("deletionTimestamp") else status.get("phase", ""),
        f"{ref.get('namespace')}/{ref.get('name')}" if ref else "",
        spec.get("storageClassName") or "",
        spec.get("volumeAttributesClassName") or "<unset>",
        status.get("reason", ""),
        age(volume["metadata"].get("creationTimestamp")),
        spec.get("volumeMode", "Filesystem"),
    ]


CLASS_COLUMNS = [
    Column("Name", ".metadata.name"),
    Column("Provisioner", ""),
    Column("ReclaimPolicy", ""),
    Column("VolumeBindingMode", ""),
    Column("AllowVolumeExpansion", ""),
    Column("Age", ""),
]


def class_cells(storage_class: Obj, age: Callable[[str | None], str]) -> list[Any]:
    meta = storage_class["metadata"]
    default = (meta.get("annotations") or {}).get(DEFAULT_CLASS) == "true"
    return [
        meta["name"] + (" (default)" if default else ""),
        storage_class.get("provisioner", ""),
        storage_class.get("reclaimPolicy", "Delete"),
        storage_class.get("volumeBindingMode", "Immediate"),
        "true" if storage_class.get("allowVolumeExpansion") else "false",
        age(meta.get("creationTimestamp")),
    ]


CLAIM = Printer(CLAIM_COLUMNS, claim_cells)
VOLUME = Printer(VOLUME_COLUMNS, volume_cells)
CLASS = Printer(CLASS_COLUMNS, class_cells)
