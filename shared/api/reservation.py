"""Koordinator's `Reservation` (`scheduling.koordinator.sh/v1alpha1`, cluster-scoped): the fields Podherd
reads and writes. The template is a `PodTemplateSpec` kept as raw JSON: Podherd copies the pod's spec into
it and never needs to understand every pod field.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final, Literal, TypeAlias

import msgspec

from shared.api import annotations as known
from shared.api.meta import Duration, KubeStruct, LabelSelector, ObjectMeta, ObjectReference
from shared.api.names import LABEL_ATTEMPT, LABEL_CREATED_BY, LABEL_JOB

KIND: Final = "Reservation"
PLURAL: Final = "reservations"

ReservationPhase: TypeAlias = Literal["Pending", "Available", "Succeeded", "Waiting", "Failed"]
PHASE_PENDING: Final = "Pending"
PHASE_AVAILABLE: Final = "Available"
PHASE_SUCCEEDED: Final = "Succeeded"
PHASE_WAITING: Final = "Waiting"
PHASE_FAILED: Final = "Failed"

ConditionType: TypeAlias = Literal["Scheduled", "Ready"]
COND_SCHEDULED: Final = "Scheduled"
COND_READY: Final = "Ready"

REASON_SCHEDULED: Final = "Scheduled"
REASON_UNSCHEDULABLE: Final = "Unschedulable"
REASON_AVAILABLE: Final = "Available"
REASON_SUCCEEDED: Final = "Succeeded"
REASON_EXPIRED: Final = "Expired"

# Set by the scheduler on a pod that took a Reservation's room (value: {"name": ..., "uid": ...}).
ANNOTATION_RESERVATION_ALLOCATED: Final = known.RESERVATION_ALLOCATED
DEFAULT_TTL: Final = "24h"


def reservation_name(job_name: str, attempt: int = 1) -> str:
    """The name of the Reservation Podherd creates for a job's `attempt` (cluster-scoped)."""
    return job_name if attempt <= 1 else f"{job_name}-{attempt}"


def attempt_of(reservation: dict[str, Any]) -> int:
    """The attempt a Reservation Podherd made is for (its label; 1 when unlabelled)."""
    labels = (reservation.get("metadata") or {}).get("labels") or {}
    return int(labels.get(LABEL_ATTEMPT) or 1)


def made_for(reservation: dict[str, Any], job_name: str) -> bool:
    """Podherd made this Reservation for this job (its labels say so): not a user-named one."""
    labels = (reservation.get("metadata") or {}).get("labels") or {}
    return bool(labels.get(LABEL_CREATED_BY) == "podherd" and labels.get(LABEL_JOB) == job_name)


class ReservationControllerReference(KubeStruct):
    """`metav1.OwnerReference` inlined, plus a namespace (Koordinator's extension)."""

    api_version: str | None = None
    kind: str | None = None
    name: str | None = None
    uid: str | None = None
    controller: bool | None = None
    block_owner_deletion: bool | None = None
    namespace: str | None = None


class ReservationOwner(KubeStruct):
    """One owner selector; its fields are AND-ed, the list of owners is OR-ed."""

    object: ObjectReference | None = None
    controller: ReservationControllerReference | None = None
    label_selector: LabelSelector | None = None


class ReservationSpec(KubeStruct):
    template: dict[str, Any] | None = None
    owners: list[ReservationOwner] = msgspec.field(default_factory=list)
    ttl: Duration | None = None
    expires: datetime | None = None
    pre_allocation: bool = False
    allocate_once: bool | None = None
    allocate_policy: Literal["", "Aligned", "Restricted"] | None = None
    unschedulable: bool = False
    taints: list[dict[str, Any]] | None = None


class ReservationCondition(KubeStruct):
    type: ConditionType | None = None
    status: Literal["True", "False", "Unknown"] | None = None
    reason: str | None = None
    message: str | None = None
    last_probe_time: datetime | None = None
    last_transition_time: datetime | None = None


class ReservationStatus(KubeStruct):
    phase: ReservationPhase | None = None
    conditions: list[ReservationCondition] | None = None
    current_owners: list[ObjectReference] | None = None
    node_name: str | None = None
    allocatable: dict[str, str] | None = None
    allocated: dict[str, str] | None = None


class Reservation(KubeStruct):
    api_version: Literal["scheduling.koordinator.sh/v1alpha1"] | None = None
    kind: Literal["Reservation"] | None = None
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: ReservationSpec = msgspec.field(default_factory=ReservationSpec)
    status: ReservationStatus | None = None

    @property
    def phase(self) -> str:
        return (self.status.phase if self.status else None) or PHASE_PENDING

    @property
    def allocate_once(self) -> bool:
        """`allocateOnce` defaults to true in Koordinator's CRD."""
        return True if self.spec.allocate_once is None else self.spec.allocate_once


def is_untaken_room(reservation: dict[str, Any]) -> bool:
    """Scheduled room that no pod has taken yet (Available, no current owners)."""
    status = reservation.get("status") or {}
    return status.get("phase") == "Available" and not status.get("currentOwners")
