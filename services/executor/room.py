"""Is there still room for the replacement? Checked before every eviction of a ReservationFirst job, each
retry after a budget's refusal included (pure).

Reservations of one workload are owned by its controller, so while a job's eviction waits (a budget
refusing it), the replacement of a sibling job may take its Reservation. Evicting then would leave the
pod's replacement without room. So the executor evicts only while the job's Reservation is Available, has
no owner yet and stands on another node than the pod; otherwise it does not evict and says why, and the
tracker reserves again (a Reservation Podherd made) or fails the job (one the user named). A Reservation
taken between this check and the eviction leaves the count whole: the sibling whose replacement took it
still holds its own, unused, which any replacement of the workload may take.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class NoRoom:
    why: str
    later: bool  # it may still come (not scheduled yet): try the eviction again later


def no_room(reservation: Mapping[str, Any] | None, pod_node: str | None) -> NoRoom | None:
    """None while `reservation` holds room for the replacement of a pod on `pod_node`."""
    if reservation is None:
        return NoRoom("the job has no Reservation", later=False)
    name = (reservation.get("metadata") or {}).get("name", "")
    status = reservation.get("status") or {}
    phase, node = status.get("phase") or "Pending", status.get("nodeName")
    owners = status.get("currentOwners") or []
    if owners or phase == "Succeeded":
        taker = f"{owners[0].get('namespace', '')}/{owners[0].get('name', '')}" if owners else "another pod"
        return NoRoom(f"Reservation {name} was taken by {taker}", later=False)
    if phase == "Failed":
        return NoRoom(f"Reservation {name} has failed", later=False)
    if phase != "Available" or not node:
        return NoRoom(f"Reservation {name} is not scheduled yet", later=True)
    if node == pod_node:
        return NoRoom(f"Reservation {name} is on the pod's own node {node}", later=False)
    return None
