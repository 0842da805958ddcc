"""What the workload controllers read and write on the objects they own: the pod template's hash, the
owner reference, and whether a pod is Ready and active; and what a controller's pass over one workload
(`deployments`, `statefulsets`) uses of the workloads controller that runs it."""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any, Protocol

from kubesim.apiserver.records import Obj

if TYPE_CHECKING:
    from kubesim.apiserver.store import Store

TERMINAL = ("Succeeded", "Failed")


class Workloads(Protocol):
    """The workloads controller as a pass over one workload uses it (without importing it: it imports the
    passes)."""

    store: Store
    pods: Any
    deployments: Any
    replicasets: Any
    statefulsets: Any

    def _children(self, owner: Obj, rt: Any) -> list[Obj]: ...

    def _create_pod(
        self,
        owner: Obj,
        template: Obj,
        generate: str | None = None,
        *,
        name: str | None = None,
        extra_labels: dict[str, str] | None = None,
    ) -> None: ...

    def _status(self, rt: Any, obj: Obj, values: dict[str, Any]) -> None: ...


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


def desired(w: Workloads, rt: Any, namespace: str, *, name: str) -> tuple[Obj, Obj, int, Obj] | None:
    """A workload a pass acts on (None: gone, or being deleted): it, its spec, its replica count (1 when
    unset) and its pod template."""
    obj = w.store.find(rt, namespace, name)
    if obj is None or obj["metadata"].get("deletionTimestamp"):
        return None
    spec = obj.get("spec") or {}
    return obj, spec, int(spec.get("replicas", 1)), spec.get("template") or {}
