"""`PodMigrationJob` (`scheduling.koordinator.sh/v1alpha1`, cluster-scoped), field for field as the
PodMigrationJob proposal.

JSON names are exactly Koordinator's, so a cluster running Koordinator's CRDs works unchanged. Two points
where the PodMigrationJob proposal's text and Koordinator's code differ follow the code: the success phase is
`Succeeded` (the PodMigrationJob proposal prints `Succeed`), and the condition type `BoundPodReady` and the
reasons `ReservationExpired`, `ForbiddenMigratePod`, `InvalidPodRef`, `WaitForBoundPodReady` that Koordinator
added later are included. Podherd's own additions live in `podherd.io/` annotations, never in new fields.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any, Final, Literal, TypeAlias

import msgspec

from shared.api.meta import DeleteOptions, Duration, KubeStruct, ObjectMeta, ObjectReference
from shared.api.names import ANNOTATION_OWN_ROOM
from shared.core.durations import parse_duration

GROUP: Final = "scheduling.koordinator.sh"
VERSION: Final = "v1alpha1"
API_VERSION: Final = "scheduling.koordinator.sh/v1alpha1"
KIND: Final = "PodMigrationJob"
PLURAL: Final = "podmigrationjobs"

Mode: TypeAlias = Literal["ReservationFirst", "EvictDirectly"]
MODE_RESERVATION_FIRST: Final = "ReservationFirst"
MODE_EVICT_DIRECTLY: Final = "EvictDirectly"

Phase: TypeAlias = Literal["Pending", "Running", "Succeeded", "Failed", "Aborted"]
PHASE_PENDING: Final = "Pending"
PHASE_RUNNING: Final = "Running"
PHASE_SUCCEEDED: Final = "Succeeded"
PHASE_FAILED: Final = "Failed"
PHASE_ABORTED: Final = "Aborted"
TERMINAL_PHASES: Final = frozenset({PHASE_SUCCEEDED, PHASE_FAILED, PHASE_ABORTED})

ConditionType: TypeAlias = Literal[
    "ReservationCreated",
    "ReservationScheduled",
    "Preemption",
    "Eviction",
    "PodScheduled",
    "PodBoundReservation",
    "BoundPodReady",
    "ReservationBound",
    "DisruptionWindow",
]
COND_RESERVATION_CREATED: Final = "ReservationCreated"
COND_RESERVATION_SCHEDULED: Final = "ReservationScheduled"
COND_PREEMPTION: Final = "Preemption"
COND_EVICTION: Final = "Eviction"
COND_POD_SCHEDULED: Final = "PodScheduled"
COND_POD_BOUND_RESERVATION: Final = "PodBoundReservation"
COND_BOUND_POD_READY: Final = "BoundPodReady"
COND_RESERVATION_BOUND: Final = "ReservationBound"
# Podherd's: False while the job waits for a disruption window to open; True from the opening it was admitted
# in (its lastTransitionTime is that opening: the job's ttl counts from it).
COND_DISRUPTION_WINDOW: Final = "DisruptionWindow"

ConditionStatus: TypeAlias = Literal["True", "False", "Unknown"]
STATUS_TRUE: Final = "True"
STATUS_FALSE: Final = "False"
STATUS_UNKNOWN: Final = "Unknown"
# `status.status` once the job has finished (Koordinator writes "Complete").
STATUS_COMPLETE: Final = "Complete"

REASON_TIMEOUT: Final = "Timeout"
REASON_FAILED_CREATE_RESERVATION: Final = "FailedCreateReservation"
REASON_INVALID_RESERVATION: Final = "InvalidReservation"
REASON_UNSCHEDULABLE: Final = "Unschedulable"
REASON_MISSING_POD: Final = "MissingPod"
REASON_MISSING_RESERVATION: Final = "MissingReservation"
REASON_PREEMPTING: Final = "Preempting"
REASON_PREEMPT_COMPLETE: Final = "PreemptComplete"
REASON_EVICTING: Final = "Evicting"
REASON_FAILED_EVICT: Final = "FailedEvict"
REASON_EVICT_COMPLETE: Final = "EvictComplete"
REASON_WAIT_FOR_POD_BIND_RESERVATION: Final = "WaitForPodBindReservation"
REASON_RESERVATION_EXPIRED: Final = "ReservationExpired"
REASON_FORBIDDEN_MIGRATE_POD: Final = "ForbiddenMigratePod"
REASON_INVALID_POD_REF: Final = "InvalidPodRef"
REASON_WAIT_FOR_BOUND_POD_READY: Final = "WaitForBoundPodReady"
# Podherd's own: a spec that decodes but cannot run (e.g. a negative ttl).
REASON_INVALID_SPEC: Final = "InvalidSpec"
# Podherd's: `dryRun` admitted the job and moved nothing (what automation reading the reason must not miss).
REASON_DRY_RUN: Final = "DryRun"
REASON_WAIT_FOR_WINDOW: Final = "WaitForDisruptionWindow"
REASON_WINDOW_OPEN: Final = "DisruptionWindowOpen"
REASONS: Final = frozenset(
    {
        REASON_TIMEOUT,
        REASON_FAILED_CREATE_RESERVATION,
        REASON_INVALID_RESERVATION,
        REASON_UNSCHEDULABLE,
        REASON_MISSING_POD,
        REASON_MISSING_RESERVATION,
        REASON_PREEMPTING,
        REASON_PREEMPT_COMPLETE,
        REASON_EVICTING,
        REASON_FAILED_EVICT,
        REASON_EVICT_COMPLETE,
        REASON_WAIT_FOR_POD_BIND_RESERVATION,
        REASON_RESERVATION_EXPIRED,
        REASON_FORBIDDEN_MIGRATE_POD,
        REASON_INVALID_POD_REF,
        REASON_WAIT_FOR_BOUND_POD_READY,
        REASON_INVALID_SPEC,
        REASON_DRY_RUN,
    }
)


class ReservationTemplateSpec(KubeStruct):
    """A Reservation's metadata and spec to merge with the pod's; schemaless in Koordinator's CRD."""

    metadata: dict[str, Any] | None = None
    spec: dict[str, Any] | None = None


class PodMigrationJobPreemptionOptions(KubeStruct):
    """Reserved by the PodMigrationJob proposal for future preemption; carried through untouched."""


class PodMigrateReservationOptions(KubeStruct):
    reservation_ref: ObjectReference | None = None
    template: ReservationTemplateSpec | None = None
    preemption_options: PodMigrationJobPreemptionOptions | None = None


class PodMigrationJobSpec(KubeStruct):
    paused: bool = False
    ttl: Duration | None = None
    mode: Mode | None = None
    # Required by the PodMigrationJob proposal, but decoded as optional: a PMJ without it must end
    # Failed/InvalidPodRef, which needs the object to decode first (see `validation.validate_pmj`).
    pod_ref: ObjectReference | None = None
    reservation_options: PodMigrateReservationOptions | None = None
    delete_options: DeleteOptions | None = None

    def ttl_seconds(self, default: str) -> float:
        """How long the job may take: its own ttl, else `default` (`defaultJobTTL`). A ttl of 0 is none at
        all, as Koordinator reads it (its controller sets a deadline only for a ttl above 0), and so is a
        `defaultJobTTL` of 0; a negative one is refused (`validation.validate_pmj`)."""
        seconds = parse_duration(default if self.ttl is None else self.ttl)
        return math.inf if seconds == 0 else seconds

    @property
    def reservation_ref_name(self) -> str | None:
        """The Reservation `reservationOptions.reservationRef` names: the user's, or the one Podherd made
        for the job's latest attempt and wrote there."""
        options = self.reservation_options
        ref = options.reservation_ref if options is not None else None
        return ref.name if ref is not None and ref.name else None


class PodMigrationJobCondition(KubeStruct):
    type: ConditionType
    status: ConditionStatus
    last_probe_time: datetime | None = None
    last_transition_time: datetime | None = None
    reason: str | None = None
    message: str | None = None


class PodMigrationJobPreemptedReservation(KubeStruct):
    namespace: str | None = None
    name: str | None = None
    node_name: str | None = None
    phase: str | None = None
    preempted_pod_ref: ObjectReference | None = None
    pods_ref: list[ObjectReference] | None = None


class PodMigrationJobStatus(KubeStruct):
    phase: Phase | None = None
    status: str | None = None
    reason: str | None = None
    message: str | None = None
    conditions: list[PodMigrationJobCondition] | None = None
    node_name: str | None = None
    pod_ref: ObjectReference | None = None
    preempted_pods_ref: list[ObjectReference] | None = None
    preempted_pods_reservations: list[PodMigrationJobPreemptedReservation] | None = msgspec.field(
        default=None, name="preemptedPodsReservation"
    )


class PodMigrationJob(KubeStruct):
    api_version: Literal["scheduling.koordinator.sh/v1alpha1"] | None = None
    kind: Literal["PodMigrationJob"] | None = None
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: PodMigrationJobSpec = msgspec.field(default_factory=PodMigrationJobSpec)
    status: PodMigrationJobStatus | None = None

    @property
    def phase(self) -> str:
        """The phase, with an unset phase read as Pending (a new job has no status yet)."""
        return (self.status.phase if self.status else None) or PHASE_PENDING

    @property
    def user_reservation(self) -> str | None:
        """The Reservation the user named for this job: a `reservationRef` Podherd did not write. Podherd
        writes its own there too, as Koordinator's controller does, and says so in `ANNOTATION_OWN_ROOM`:
        whose the Reservation is never depends on its name (a user may name one as Podherd would)."""
        ref = self.spec.reservation_ref_name
        ours = (self.metadata.annotations or {}).get(ANNOTATION_OWN_ROOM)
        return ref if ref is not None and ref != ours else None


def new_pmj(name: str, pod_ref: ObjectReference, **spec: Any) -> PodMigrationJob:
    """A PMJ ready to create: apiVersion and kind set, spec fields as keyword arguments."""
    return PodMigrationJob(
        api_version=API_VERSION,
        kind=KIND,
        metadata=ObjectMeta(name=name),
        spec=PodMigrationJobSpec(pod_ref=pod_ref, **spec),
    )
