"""Kubernetes Events, as the scheduler and the kubelet record them (`kubectl describe` shows them)."""

from __future__ import annotations

from typing import Any

from kubesim.apiserver.records import Obj, now_iso
from kubesim.apiserver.store import Store


def record_event(
    store: Store, events_rt: Any, obj: Obj, *, kind: str, reason: str, message: str, component: str
) -> None:
    meta = obj["metadata"]
    namespace = meta.get("namespace") or "default"
    stamp = now_iso()
    store.put(
        events_rt,
        {
            "metadata": {
                "name": f"{meta['name']}.{store.rv + 1:x}",
                "namespace": namespace,
                "uid": f"ev-{store.rv + 1}",
                "creationTimestamp": stamp,
            },
            "involvedObject": {
                "kind": obj.get("kind"),
                "apiVersion": obj.get("apiVersion"),
                "name": meta["name"],
                "namespace": meta.get("namespace"),
                "uid": meta.get("uid"),
            },
            "reason": reason,
            "message": message,
            "type": kind,
            "source": {"component": component},
            "reportingComponent": component,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        },
        "ADDED",
    )
