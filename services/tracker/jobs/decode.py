"""Live objects as the state machine sees them (`machine.PodView`, `ReservationView`), decoded from the API
server's JSON."""

from __future__ import annotations

from typing import Any

import msgspec

from services.tracker.jobs.machine import PodView, ReservationView
from shared.api.meta import parse_time
from shared.api.names import LABEL_CREATED_BY
from shared.api.pmj import PodMigrationJob


class _Labels(msgspec.Struct):
    labels: dict[str, str] | None = None


class _Phase(msgspec.Struct):
    phase: str | None = None


class ReservationHead(msgspec.Struct):
    metadata: _Labels = msgspec.field(default_factory=_Labels)
    status: _Phase | None = None


class ReservationEvent(msgspec.Struct):
    """A Reservation's event read for its labels and phase only."""

    object: ReservationHead


class JobEvent(msgspec.Struct):
    object: PodMigrationJob


def pod_view(pod: dict[str, Any]) -> PodView:
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
    )
    controller = next((o for o in meta.get("ownerReferences") or [] if o.get("controller")), None)
    return PodView(
        namespace=meta.get("namespace") or "",
        name=meta.get("name") or "",
        uid=meta.get("uid") or "",
        node=(pod.get("spec") or {}).get("nodeName"),
        terminating=bool(meta.get("deletionTimestamp")) or status.get("phase") in ("Succeeded", "Failed"),
        ready=ready,
        controller_uid=controller.get("uid") if controller else None,
        deleted_at=parse_time(meta.get("deletionTimestamp")),
    )


def node_ready(node: dict[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def reservation_view(reservation: dict[str, Any]) -> ReservationView:
    meta = reservation.get("metadata") or {}
    spec = reservation.get("spec") or {}
    status = reservation.get("status") or {}
    conditions = status.get("conditions") or []
    scheduled = next((c for c in conditions if c.get("type") == "Scheduled"), None)
    ready = next((c for c in conditions if c.get("type") == "Ready"), None)
    unschedulable = None
    if scheduled is not None and scheduled.get("status") == "False":
        unschedulable = scheduled.get("message") or scheduled.get("reason") or "unschedulable"
    controller = next((o.get("controller") for o in spec.get("owners") or [] if o.get("controller")), None)
    return ReservationView(
        name=meta.get("name") or "",
        phase=status.get("phase") or "Pending",
        node=status.get("nodeName"),
        unschedulable=unschedulable,
        failed_reason=(ready or {}).get("reason") if status.get("phase") == "Failed" else None,
        owner_controller_uid=(controller or {}).get("uid"),
        bound=tuple(
            (o.get("namespace") or "", o.get("name") or "", o.get("uid") or "")
            for o in status.get("currentOwners") or []
        ),
        ours=(meta.get("labels") or {}).get(LABEL_CREATED_BY) == "podherd",
        uid=meta.get("uid") or "",
    )
