"""The watchdog's invariant for surges (pure): while a Deployment surges, it never has fewer Ready pods than
it had replicas before the surge (or, if it had fewer Ready already, than it had then).

Replayed from the API server's events in resourceVersion order (one sequence for every kind): the
Deployment's `podherd.io/surge` record opens and closes its surge, its ReplicaSets tie pods to it, and every
pod event moves its count of Ready pods that are not being deleted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from shared.api.surge import record_of

DEPLOYMENT, REPLICASET = "Deployment", "ReplicaSet"
Event = tuple[int, str, str, dict[str, Any]]  # (resourceVersion, kind, type, object)


def _key(obj: dict[str, Any], name: str | None = None) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{name or meta.get('name', '')}"


def _controller(obj: dict[str, Any], kind: str) -> str | None:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    ref = next((r for r in refs if r.get("controller") and r.get("kind") == kind), None)
    return _key(obj, ref["name"]) if ref else None


def _serving(obj: dict[str, Any], event_type: str) -> bool:
    if event_type == "DELETED" or (obj.get("metadata") or {}).get("deletionTimestamp"):
        return False
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


class _Replay:
    def __init__(self) -> None:
        self.deployment_of: dict[str, str] = {}  # ReplicaSet -> its Deployment
        self.pods: dict[str, tuple[str, bool]] = {}  # pod uid -> (Deployment, Ready and staying)
        self.ready: Counter[str] = Counter()  # Deployment -> its Ready pods
        self.floors: dict[str, int] = {}  # surging Deployment -> the fewest Ready pods it may have
        self.breaches: list[str] = []
        self.surges = 0  # surges seen opening

    def replica_set(self, event_type: str, obj: dict[str, Any]) -> None:
        owner = _controller(obj, DEPLOYMENT)
        if owner is not None and event_type != "DELETED":
            self.deployment_of[_key(obj)] = owner

    def deployment(self, event_type: str, obj: dict[str, Any]) -> None:
        key = _key(obj)
        record = record_of(obj) if event_type != "DELETED" else None
        if record is None:
            self.floors.pop(key, None)
        elif key not in self.floors:
            self.floors[key] = min(record.replicas, self.ready[key])
            self.surges += 1

    def pod(self, event_type: str, obj: dict[str, Any]) -> None:
        uid = (obj.get("metadata") or {}).get("uid") or ""
        rs = _controller(obj, REPLICASET)
        deployment = self.deployment_of.get(rs or "", "")
        before = self.pods.get(uid)
        if before is not None and before[1]:
            self.ready[before[0]] -= 1
        serving = _serving(obj, event_type)
        if event_type == "DELETED":
            self.pods.pop(uid, None)
        else:
            self.pods[uid] = (deployment, serving)
        if serving:
            self.ready[deployment] += 1
        floor = self.floors.get(deployment)
        if deployment and floor is not None and self.ready[deployment] < floor:
            self.breaches.append(
                f"{deployment}: {self.ready[deployment]} Ready pods during its surge, fewer than {floor}"
            )


def surge_floor_breaches(events: Iterable[Event]) -> tuple[list[str], int]:
    """Every moment a surging Deployment had fewer Ready pods than before its surge, and how many surges
    were watched."""
    replay = _Replay()
    for _, kind, event_type, obj in sorted(events, key=lambda e: e[0]):
        if kind == REPLICASET:
            replay.replica_set(event_type, obj)
        elif kind == DEPLOYMENT:
            replay.deployment(event_type, obj)
        elif kind == "Pod":
            replay.pod(event_type, obj)
    return replay.breaches, replay.surges
