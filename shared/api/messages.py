"""Every message Podherd puts on NATS, declared once.

Each message carries `schemaVersion`. A consumer accepts the versions it knows and rejects newer ones with a
clear error (the message is dead-lettered, not guessed at). Messages from outside Podherd (intents) also
reject unknown fields, so a misspelt `targetnode` is an error rather than a silently ignored option;
Podherd's own messages tolerate unknown fields so a newer producer can add optional fields during a rolling
upgrade without breaking older consumers.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Final, Generic, Literal, TypeAlias, TypeVar

import msgspec

from shared.api.drain import DrainOptions
from shared.api.meta import Duration, ObjectReference
from shared.api.pmj import Mode, Phase, PodMigrationJob
from shared.api.reservation import Reservation

SCHEMA_VERSION: Final = 1

# DNS-1123 label (namespaces, node names are subdomains but labels cover the common case) and subdomain.
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
Namespace = Annotated[str, msgspec.Meta(pattern=DNS_LABEL, max_length=63)]
ObjectName = Annotated[str, msgspec.Meta(pattern=DNS_SUBDOMAIN, max_length=253)]


class Message(msgspec.Struct, rename="camel", kw_only=True):
    """Base of every NATS message: camelCase JSON and a schema version that is always written."""

    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        if not 1 <= self.schema_version <= SCHEMA_VERSION:
            raise ValueError(
                f"unsupported schemaVersion {self.schema_version}: this build reads 1..{SCHEMA_VERSION}"
            )


# ---------------------------------------------------------------------------------------------------------
# Intents: what external systems (deschedulers, defragmenters, maintenance tools) publish.


class PodKey(msgspec.Struct, rename="camel", kw_only=True, forbid_unknown_fields=True):
    namespace: Namespace
    name: ObjectName
    uid: str | None = None


class AtomicPlan(msgspec.Struct, rename="camel", kw_only=True, forbid_unknown_fields=True):
    """The plan an intent's job belongs to when all of the plan's moves must have room before any pod goes:
    its jobs wait paused with their room reserved until all `size` have it, then move; if `timeout` passes
    first, every one of them is aborted (its room released) and nothing is evicted."""

    name: Annotated[str, msgspec.Meta(pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")]
    size: Annotated[int, msgspec.Meta(ge=1, le=10_000)]
    timeout: Duration


class MigrationIntent(Message, kw_only=True, forbid_unknown_fields=True):
    """A request to migrate one pod. `idempotencyKey` names the job: the same key twice is one job."""

    kind: Literal["Migration"] = "Migration"  # the discriminator among intents (absent: a migration)
    idempotency_key: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    pod: PodKey
    requester: Annotated[str, msgspec.Meta(min_length=1, max_length=253)]
    target_node: ObjectName | None = None
    mode: Mode | None = None
    ttl: Duration | None = None
    # Migration priority: the PodMigrationJob proposal sorts "the higher migration priority" first.
    priority: int = 0
    reason: Annotated[str, msgspec.Meta(max_length=1024)] | None = None
    paused: bool = False
    atomic_plan: AtomicPlan | None = None


class DrainIntent(Message, kw_only=True, forbid_unknown_fields=True):
    """A request to drain a node: cordon it and move each of its pods with a job, by kubectl drain's rules
    and flags. Sent again, it continues the drain (the same pods have the same jobs)."""

    kind: Literal["Drain"]
    node: ObjectName
    requester: Annotated[str, msgspec.Meta(min_length=1, max_length=253)]
    options: DrainOptions = msgspec.field(default_factory=DrainOptions)
    dry_run: bool = False  # plan only: nothing is cordoned or created


class IntentKind(msgspec.Struct, kw_only=True):
    """What an intent on the request subject asks for, read before the rest of it."""

    kind: str = "Migration"


IntentErrorCode: TypeAlias = Literal[
    "InvalidIntent",
    "MissingPod",
    "MissingNode",
    "Refused",
    "Conflict",
    "Forbidden",
    "TooManyRequests",
    "Unavailable",
    "Internal",
]


class IntentError(msgspec.Struct, rename="camel", kw_only=True):
    code: IntentErrorCode
    message: str
    field: str | None = None


class IntentReply(Message, kw_only=True):
    """The answer on an intent's reply subject: the job's name, or a specific error."""

    ok: bool
    job: str | None = None
    created: bool = False
    error: IntentError | None = None


class DrainMove(msgspec.Struct, rename="camel", kw_only=True):
    pod: str  # namespace/name
    job: str
    mode: Mode
    why: str | None = None  # why this strategy, when it is not ReservationFirst


class DrainReply(Message, kw_only=True):
    """The answer to a drain intent: the jobs that move the node's pods, the pods that stay and why, and,
    when it was refused, why (nothing was cordoned or created then)."""

    ok: bool
    node: str
    moves: list[DrainMove] = msgspec.field(default_factory=list)
    stays: dict[str, str] = msgspec.field(default_factory=dict)
    warnings: list[str] = msgspec.field(default_factory=list)
    refusals: list[str] = msgspec.field(default_factory=list)  # kubectl's words, each naming its pods
    error: IntentError | None = None


# ---------------------------------------------------------------------------------------------------------
# Watch events: what the watcher publishes, one envelope for every kind with a slim payload per kind.

EventType: TypeAlias = Literal["ADDED", "MODIFIED", "DELETED"]
WatchedKind: TypeAlias = Literal[
    "Pod",
    "PodMigrationJob",
    "Reservation",
    "PodDisruptionBudget",
    "Deployment",
    "ReplicaSet",
    "StatefulSet",
    "Node",
    "ServiceAccount",
]


class WorkloadRef(msgspec.Struct, rename="camel", kw_only=True):
    """The workload a pod belongs to, resolved through ReplicaSet -> Deployment where that applies."""

    kind: str
    namespace: str
    name: str
    uid: str | None = None


class PodInfo(msgspec.Struct, rename="camel", kw_only=True, omit_defaults=True):
    """What downstream needs of a pod; built from the raw JSON without the client's model classes."""

    uid: str
    namespace: str
    name: str
    node_name: str | None = None
    phase: str | None = None
    ready: bool = False
    deletion_timestamp: datetime | None = None
    # Deleted through the Eviction API (its DisruptionTarget condition), not outright by someone.
    evicted: bool = False
    created_at: datetime | None = None
    started_at: datetime | None = None  # status.startTime: when the kubelet took the pod on
    owner: ObjectReference | None = None
    workload: WorkloadRef | None = None
    priority: int | None = None
    priority_class_name: str | None = None
    qos_class: str | None = None
    scheduler_name: str | None = None
    requests: dict[str, str] = msgspec.field(default_factory=dict)
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    annotations: dict[str, str] = msgspec.field(default_factory=dict)
    volume_kinds: list[str] = msgspec.field(default_factory=list)
    mirror: bool = False


class PdbInfo(msgspec.Struct, rename="camel", kw_only=True, omit_defaults=True):
    uid: str
    namespace: str
    name: str
    selector: dict[str, str] = msgspec.field(default_factory=dict)
    min_available: int | str | None = None
    max_unavailable: int | str | None = None
    current_healthy: int = 0
    desired_healthy: int = 0
    disruptions_allowed: int = 0
    expected_pods: int = 0

    def selects(self, labels: dict[str, str]) -> bool:
        """Whether the budget covers a pod of these labels (matchLabels; an empty selector selects nothing, as
        policy/v1 reads it)."""
        return bool(self.selector) and all(labels.get(k) == v for k, v in self.selector.items())


class WorkloadInfo(msgspec.Struct, rename="camel", kw_only=True, omit_defaults=True):
    uid: str
    kind: str
    namespace: str
    name: str
    replicas: int = 0
    ready_replicas: int = 0
    available_replicas: int = 0
    updated_replicas: int = 0
    owner: ObjectReference | None = None


class NodeInfo(msgspec.Struct, rename="camel", kw_only=True, omit_defaults=True):
    uid: str
    name: str
    ready: bool = True
    unschedulable: bool = False
    allocatable: dict[str, str] = msgspec.field(default_factory=dict)
    labels: dict[str, str] = msgspec.field(default_factory=dict)


class EventHead(msgspec.Struct, rename="camel"):
    """An event's envelope without its object: enough to route it (decoded first, cheaply)."""

    kind: str = ""
    type: str = ""
    uid: str = ""
    namespace: str | None = None
    name: str = ""
    resource_version: str = ""
    error: str | None = None

    @property
    def ident(self) -> str:
        """`namespace/name`, or `name` for a cluster-scoped object."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


class AccountInfo(msgspec.Struct, rename="camel", kw_only=True):
    """A ServiceAccount, as far as Podherd cares: that it exists (a token of a deleted one proves nothing)."""

    uid: str
    namespace: str
    name: str


Payload = TypeVar(
    "Payload", PodInfo, PodMigrationJob, Reservation, PdbInfo, WorkloadInfo, NodeInfo, AccountInfo
)


class ObjectEvent(Message, Generic[Payload], kw_only=True):
    """One change of one object. `Nats-Msg-Id` is `uid/resourceVersion`, so a republish is de-duplicated."""

    kind: WatchedKind | str  # or a configured workload kind (`CloneSet.apps.kruise.io`)
    type: EventType
    name: str
    uid: str
    resource_version: str
    namespace: str | None = None
    observed_at: datetime
    object: Payload
    # Set when the object itself could not be decoded (e.g. a PMJ with an unknown mode): `object` then holds
    # only its identity, and the error says what is wrong, so the tracker can fail the job with the reason.
    error: str | None = None


# ---------------------------------------------------------------------------------------------------------
# Decisions: the arbitrator's verdict on one pending job.

DecisionKind: TypeAlias = Literal["admitted", "rejected", "deferred"]
# What the tracker asks the executor to do (the last three: a Surge's scale-up, scale-down, and its end).
Step: TypeAlias = Literal["reserve", "evict", "cleanup", "surge", "scale-back", "unsurge"]
Outcome: TypeAlias = Literal["done", "gone", "blocked", "background", "failed", "checked"]


class JobRef(msgspec.Struct, rename="camel", kw_only=True):
    name: str
    uid: str


class Kick(Message, kw_only=True):
    """`p.jobs.kick.<job>` (the tracker, to itself): look at the job again; its workload's room or pods
    changed."""

    job: JobRef


class JobUnlocked(Message, kw_only=True):
    """`p.tracker.unlocked` (core NATS): a job's lock was released; a replica waiting for it tries again."""

    job: str


class SlotsReleased(Message, kw_only=True):
    """`p.ledger.released` (core NATS): a job's ledger slots were released; the arbitrator looks at its
    queue again at once."""

    job_uid: str


class WindowOpening(msgspec.Struct, rename="camel", kw_only=True, frozen=True):
    """One opening of a disruption window (`migrationController.disruptionWindows`), in UTC."""

    window: str  # its name, or its schedule and zone
    opens_at: datetime
    closes_at: datetime


class Decision(Message, kw_only=True):
    job: JobRef
    decision: DecisionKind
    rule: str
    message: str
    # The PMJ reason a rejection ends the job with (ForbiddenMigratePod, MissingPod, ...).
    reason: str | None = None
    decided_at: datetime
    replica: str
    slots: list[str] = msgspec.field(default_factory=list)
    strategy: str | None = None  # admitted: "Surge" when the job moves by Surge
    # deferred: the disruption window's opening the job waits for; admitted: the one it was admitted in
    window: WindowOpening | None = None


class Command(Message, kw_only=True):
    """The tracker asks the executor to act for a job: `reserve`, `evict` or `cleanup` (delete its
    Reservation). `pod_uid` is the pod the job moves: the executor never evicts another one."""

    job: JobRef
    step: Step
    pod_uid: str | None = None
    attempt: int = 1  # reserve: which of the job's Reservations to create
    issued_at: datetime
    # cleanup: keep the job's Reservations no pod took (a sibling's replacement may need the room), and
    # delete those other ended jobs of the workload kept
    keep_untaken: bool = False
    also: list[str] = msgspec.field(default_factory=list)
    # cleanup: the job's Reservation attempts the tracker asked for, each read by its name (0: not known,
    # listed by the job's label)
    attempts: int = 0
    # scale-back, unsurge: the Deployment (namespace/name) the surge scaled, as its report named it
    target: str | None = None


class Report(Message, kw_only=True):
    """What the executor did about a command (`outcome`: done, gone, blocked, failed; `checked`: the room was
    Available and the eviction is on its way), for the tracker."""

    job: JobRef
    step: Step
    outcome: Outcome
    message: str
    target: str | None = None  # surge: the Deployment (namespace/name) it scales
    policy: str | None = None  # evict: the policy the pod goes by, where its or its job's label chose one
    reported_at: datetime


# ---------------------------------------------------------------------------------------------------------
# Audit: the append-only story of every job.

AUDIT_INTENT_RECEIVED: Final = "intent.received"
AUDIT_INTENT_REJECTED: Final = "intent.rejected"
AUDIT_JOB_CREATED: Final = "job.created"
AUDIT_DECISION: Final = "decision"
AUDIT_KUBE_WRITE: Final = "kube.write"
AUDIT_PHASE_CHANGED: Final = "phase.changed"
AUDIT_CONDITION_CHANGED: Final = "condition.changed"
AUDIT_LEDGER_RELEASED: Final = "ledger.released"


class AuditRecord(Message, kw_only=True):
    """One thing that happened to a job. `id` is deterministic, so a retried write is de-duplicated."""

    id: str
    time: datetime
    action: str
    actor: str
    job: str | None = None
    job_uid: str | None = None
    requester: str | None = None
    phase: Phase | None = None
    previous_phase: Phase | None = None
    rule: str | None = None
    reason: str | None = None
    message: str | None = None
    details: dict[str, str] = msgspec.field(default_factory=dict)


# ---------------------------------------------------------------------------------------------------------
# Dead letters: what a consumer could not decode, with the error, so nothing vanishes silently.


class DeadLetter(Message, kw_only=True):
    subject: str
    consumer: str
    error: str
    field: str | None = None
    received_at: datetime
    data: bytes
