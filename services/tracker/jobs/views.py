"""What the state machine decides from (`Observed`: the job, its pod, Reservation, replacement, reports) and
what it decides (`Step`: the next status and the actions that move the job on), and the status's conditions
as a step changes them (`Conditions`) (pure)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Final, Literal, TypeAlias

from shared.api.messages import Report, WindowOpening
from shared.api.messages import Step as CommandStep
from shared.api.pmj import (
    STATUS_TRUE,
    ConditionStatus,
    ConditionType,
    PodMigrationJob,
    PodMigrationJobCondition,
    PodMigrationJobStatus,
)


@dataclass(frozen=True)
class PodView:
    namespace: str
    name: str
    uid: str
    node: str | None
    terminating: bool
    ready: bool
    controller_uid: str | None
    deleted_at: datetime | None = None  # its deletionTimestamp: going, but not gone
    node_ready: bool | None = None  # of its node, looked up only while it is terminating (None: not known)

    def going(self) -> str:
        """What a pod that is terminating but still exists is waiting on, for the status."""
        where = f" on node {self.node}" if self.node else ""
        # its deletionTimestamp is when its grace period ends, not when its deletion began
        ends = f"; its grace period ends {self.deleted_at:%Y-%m-%dT%H:%M:%SZ}" if self.deleted_at else ""
        stuck = " (NotReady: its kubelet cannot finish it)" if self.node_ready is False else ""
        return f"pod {self.namespace}/{self.name} is terminating{where}{stuck}{ends}"


@dataclass(frozen=True)
class ReservationView:
    name: str
    phase: str  # Pending | Available | Succeeded | Failed | Waiting
    node: str | None
    unschedulable: str | None  # the scheduler's message while it cannot place it
    failed_reason: str | None
    owner_controller_uid: str | None  # whose replacements it is for
    bound: tuple[tuple[str, str, str], ...] = ()  # (namespace, name, uid) of the pods that took it
    ours: bool = True  # made by Podherd (labelled so); False: one the user named, never made again
    uid: str = ""


@dataclass(frozen=True)
class Observed:
    job: PodMigrationJob
    now: datetime
    admitted: bool
    rejection: tuple[str, str] | None  # (reason, message) when the arbitrator rejected it
    pod: PodView | None  # the pod to move, if it still exists (and is the one the job was made for)
    reservation: ReservationView | None  # the job's current Reservation (its latest attempt)
    bound_pod: PodView | None  # the pod that took the current Reservation, if it exists
    replacement: PodView | None  # after the eviction: the replacement this job claimed, if it exists
    eviction_note: str | None  # the executor's latest word on the eviction (e.g. a PDB refusing it)
    reserve_failed: str | None  # why the executor could not create the Reservation, and never will
    default_mode: str
    default_ttl: str
    reserve_retrying: str | None = None  # why it could not yet (the API server away): it tries again
    dry_run: bool = False
    eviction_sent: bool = False  # the executor found the room and sent the eviction; no outcome yet
    # The pod went, after its eviction was asked for, deleted outright by someone else: not evicted, not moved
    deleted_by_others: bool = False
    attempt: int = 0  # the current Reservation's attempt (0: none made yet)
    asked: int = 0  # the latest attempt the tracker asked the executor to make (0: none known)
    claimed: tuple[str, str, str] | None = None  # the replacement claimed, even if it is gone now
    surge: bool = False  # moved by Surge (`podherd.io/strategy`)
    surged: Report | None = None  # the executor's latest word on the scale-up
    scaled_back: Report | None = None  # ... and on the scale-down
    # The disruption window's latest opening the arbitrator named for the job: waited for, or admitted in
    window: WindowOpening | None = None
    # What the arbitrator last said the job waits for before its admission ("": nothing said)
    deferral: str = ""
    # The phase whose transition the audit stream last acknowledged (None: none known)
    audited: str | None = None


# What a step does beside its status: a command to the executor, or the release of the job's slots.
Action: TypeAlias = CommandStep | Literal["release"]

# The executor's steps (the commands' own type), and the tracker's one action of its own.
RESERVE: Final[CommandStep] = "reserve"
EVICT: Final[CommandStep] = "evict"
CLEANUP: Final[CommandStep] = "cleanup"
SURGE: Final[CommandStep] = "surge"
SCALE_BACK: Final[CommandStep] = "scale-back"
UNSURGE: Final[CommandStep] = "unsurge"
RELEASE: Final[Literal["release"]] = "release"


@dataclass
class Step:
    status: PodMigrationJobStatus
    actions: tuple[Action, ...] = ()
    events: list[tuple[str, str, str]] = field(default_factory=list)  # (type, reason, message) to record
    attempt: int = 1  # for RESERVE: the attempt to create


@dataclass
class Conditions:
    """A job's status conditions as a step changes them, and which changed last (`status.status`)."""

    items: list[PodMigrationJobCondition]
    last_changed: str | None

    def get(self, kind: str) -> PodMigrationJobCondition | None:
        return next((c for c in self.items if c.type == kind), None)

    def true(self, kind: str) -> bool:
        found = self.get(kind)
        return found is not None and found.status == STATUS_TRUE

    def set(
        self, kind: ConditionType, status: ConditionStatus, reason: str, *, message: str, now: datetime
    ) -> bool:
        """Set a condition; its lastTransitionTime moves only when its status changes (then True)."""
        old = self.get(kind)
        if old is not None and (old.status, old.reason or "", old.message or "") == (status, reason, message):
            return False
        moved = old is None or old.status != status
        since = now if moved or old is None else old.last_transition_time
        condition = PodMigrationJobCondition(
            type=kind, status=status, reason=reason or None, message=message, last_transition_time=since
        )
        self.items = [c for c in self.items if c.type != kind] + [condition]
        self.last_changed = kind
        return moved
