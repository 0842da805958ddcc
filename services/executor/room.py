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

from shared.api.audit import audit_record
from shared.api.messages import AuditRecord
from shared.api.pmj import PodMigrationJob
from shared.api.pod import Pod


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


def room_checked(
    job: PodMigrationJob, reservation: Mapping[str, Any], pod: Pod, *, actor: str
) -> AuditRecord:
    """The audit record of a room check that passed: the Reservation's name, resourceVersion and node. The
    check and the eviction are two requests: a sibling's replacement may still take this room in between;
    Reservations are the workload's (as in Koordinator), so this job's replacement then takes the sibling's,
    and the claims pair each job with one replacement."""
    held = reservation.get("metadata") or {}
    name, version = held.get("name") or "", held.get("resourceVersion") or ""
    node = (reservation.get("status") or {}).get("nodeName") or ""
    uid = job.metadata.uid or ""
    return audit_record(
        "room-checked",
        name,
        version,
        by=actor,
        job=job.metadata.name,
        job_uid=uid,
        message=f"Reservation {name} Available, unbound, on {node} at resourceVersion {version}",
        details={
            "reservation": name,
            "resourceVersion": version,
            "node": node,
            "podUid": pod.metadata.uid or "",
        },
    )
