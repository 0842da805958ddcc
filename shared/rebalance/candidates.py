"""The pods a plan may move, and what a plan knows of each beyond its fit: its workload, its priority, and
whether something protects it from eviction that no admission would lift."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shared.api import annotations as known
from shared.fit.views import PodView, pod_view

MOVABLE_OWNERS = frozenset({"ReplicaSet", "StatefulSet"})
NEVER = str(2**31 - 1)  # an eviction cost of MaxInt32: never evict


@dataclass(frozen=True)
class Candidate:
    view: PodView
    owner: str | None  # "Kind/name" of its controller
    priority: int = 0
    deletion_cost: int = 0
    protected: str | None = None  # why it must not move, if it must not
    scheduler: str = "default-scheduler"

    @property
    def key(self) -> str:
        return self.view.key


def candidate(obj: Mapping[str, Any], *, moved_since: str = "") -> Candidate:
    """The pod as a plan sees it. `moved_since` (an RFC 3339 time): a pod that took a Reservation's room
    (a move's replacement) and was created after it stays, so no plan undoes a move of the last minutes."""
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    annotations = meta.get("annotations") or {}
    owner = next((o for o in meta.get("ownerReferences") or () if o.get("controller")), None)
    owner_name = f"{owner.get('kind')}/{owner.get('name')}" if owner else None
    try:
        cost = int(annotations.get(known.POD_DELETION_COST, "0"))
    except ValueError:
        cost = 0
    return Candidate(
        view=pod_view(obj),
        owner=owner_name,
        priority=int(spec.get("priority") or 0),
        deletion_cost=cost,
        protected=_protected(meta, annotations, owner.get("kind") if owner else None)
        or _moved_recently(meta, annotations, moved_since),
        scheduler=str(spec.get("schedulerName") or "default-scheduler"),
    )


def _protected(meta: Mapping[str, Any], annotations: Mapping[str, str], owner_kind: str | None) -> str | None:
    if owner_kind not in MOVABLE_OWNERS:
        return f"owned by {owner_kind}" if owner_kind else "no controller"
    if meta.get("deletionTimestamp"):
        return "terminating"
    if annotations.get(known.DO_NOT_DISRUPT) == "true":
        return f"{known.DO_NOT_DISRUPT}=true"
    if annotations.get(known.SAFE_TO_EVICT) == "false":
        return f"{known.SAFE_TO_EVICT}=false"
    if annotations.get(known.EVICTION_COST) == NEVER:
        return f"{known.EVICTION_COST}={NEVER}"
    if known.PREFER_NO_EVICTION in annotations:
        return known.PREFER_NO_EVICTION
    return None


def _moved_recently(meta: Mapping[str, Any], annotations: Mapping[str, str], since: str) -> str | None:
    created = str(meta.get("creationTimestamp") or "")
    if since and known.RESERVATION_ALLOCATED in annotations and created >= since:
        return f"moved here at {created}, within the window no plan undoes"
    return None
