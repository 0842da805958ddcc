"""What the workload controllers read and write on the objects they own: the pod template's hash, the
owner reference, and whether a pod is Ready and active."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from kubesim.records import Obj

TERMINAL = ("Succeeded", "Failed")


def template_hash(template: Obj) -> str:
    """The pod template's hash, blind to empty values as the API server's (over Go structs, where an empty
    `resources: {}` and none are the same): kubectl's rollback sends them, the original did not."""
    digest = hashlib.sha256(json.dumps(_without_empty(template), sort_keys=True).encode()).hexdigest()
    return digest[:10]


def _without_empty(value: Any) -> Any:
    if isinstance(value, dict):
        kept = {k: _without_empty(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v not in (None, {}, [], "")}
    if isinstance(value, list):
        return [_without_empty(v) for v in value]
    return value


def is_ready(pod: Obj) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def is_active(pod: Obj) -> bool:
    return (
        not pod["metadata"].get("deletionTimestamp")
        and (pod.get("status") or {}).get("phase") not in TERMINAL
    )


def owner_ref(owner: Obj) -> Obj:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
