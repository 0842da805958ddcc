"""Podherd's own label and annotation keys (`podherd.io/…`), one spelling each, by the object they are
on. The modules of each object (`pmj`, `drain`, `surge`, `reservation`) name them from here.

Two keys serve two objects each, with one meaning: `podherd.io/drain` (a drain's jobs are labelled with it,
the node carries the drain's record under it) and `podherd.io/attempt` (on a Reservation, the job's attempt
it is for)."""

from __future__ import annotations

from typing import Final

DRAIN: Final = "podherd.io/drain"

# On a PodMigrationJob (never new fields: annotations).
ANNOTATION_TARGET_NODE: Final = "podherd.io/target-node"
ANNOTATION_INTENT_ID: Final = "podherd.io/intent-id"
# Where an intent's pod was, and its controller (Kind/name), when its job was made: what a plan reads so as
# not to undo a recent move.
ANNOTATION_SOURCE_NODE: Final = "podherd.io/source-node"
ANNOTATION_WORKLOAD: Final = "podherd.io/workload"
ANNOTATION_REASON: Final = "podherd.io/reason"  # why an intent asked for it, for the audit trail
ANNOTATION_OWN_ROOM: Final = "podherd.io/reservation-ref"  # the reservationRef Podherd wrote
ANNOTATION_REQUESTER: Final = "podherd.io/requester"  # as verified: who the request was authorized as
ANNOTATION_CLAIMED_REQUESTER: Final = "podherd.io/claimed-requester"  # what the intent said it was from
ANNOTATION_MIGRATION_PRIORITY: Final = "podherd.io/migration-priority"
ANNOTATION_ABORT: Final = "podherd.io/abort"
ANNOTATION_LEDGER: Final = "podherd.io/ledger"  # what it holds in the ledger, to rebuild it from
ANNOTATION_STRATEGY: Final = "podherd.io/strategy"  # Surge (spec.mode stays ReservationFirst)
# A drain's job: its node's name hashed (label values stop at 63 characters) and in full; the filters the
# drain lifts for it; why it moves otherwise than ReservationFirst; an atomic drain's, waiting paused.
LABEL_DRAIN: Final = DRAIN
ANNOTATION_DRAIN_NODE: Final = "podherd.io/drain-node"
ANNOTATION_LIFTS: Final = "podherd.io/drain-lifts"
ANNOTATION_STRATEGY_REASON: Final = "podherd.io/strategy-reason"
ANNOTATION_ATOMIC: Final = "podherd.io/drain-atomic"

# An atomic plan's job (`podherd rebalance --atomic`): the plan's name, how many jobs it has, and how long
# they may wait, paused with their room reserved, for every one of them to have room.
LABEL_ATOMIC_PLAN: Final = "podherd.io/atomic-plan"
ANNOTATION_ATOMIC_SIZE: Final = "podherd.io/atomic-plan-size"
ANNOTATION_ATOMIC_TIMEOUT: Final = "podherd.io/atomic-plan-timeout"

# On a node: the drain's record (JSON).
ANNOTATION_NODE_DRAIN: Final = DRAIN

# On a Deployment while it surges for a job.
ANNOTATION_SURGE: Final = "podherd.io/surge"

# On every Reservation Podherd makes: who made it, the job, its attempt, and whose replacements it is for.
LABEL_CREATED_BY: Final = "podherd.io/created-by"
LABEL_JOB: Final = "podherd.io/job"
LABEL_ATTEMPT: Final = "podherd.io/attempt"
LABEL_CONTROLLER: Final = "podherd.io/controller"

# The admission gate's. On a pod or its namespace, "true" opts its evictions in to evacuation by a migration
# ("false" on a pod opts it out of its namespace's).
LABEL_EVACUATE: Final = "podherd.io/evacuate"
# On the jobs the gate makes: the pod's name they were made for (namespace/name hashed, to fit a label).
LABEL_EVACUATED_POD: Final = "podherd.io/evacuated-pod"
# The value the gate marks a pod's eviction-in-progress with (then the job's name): the pod is moved by a
# Podherd job, counted through that job once admitted, not as an eviction in the background beside it.
GATE_EVACUATION: Final = "podherd.io/job="
