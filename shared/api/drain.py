"""A node drain's names: the label and annotations on its jobs and on the node, and the record the node
keeps of the drain (what was asked, whether the node was cordoned before, which jobs move its pods)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

import msgspec

from shared.api.meta import Duration
from shared.api.names import ANNOTATION_LIFTS, ANNOTATION_NODE_DRAIN

# The only filters a drain may lift: `--delete-emptydir-data` and `--force` (bare pods).
LIFT_LOCAL_STORAGE: Final = "LocalStorage"
LIFT_BARE_POD: Final = "BarePod"
LIFTABLE: Final = frozenset({LIFT_LOCAL_STORAGE, LIFT_BARE_POD})
# An atomic drain's phases, in its record: room being reserved for every pod; the pods moving; given up (no
# room for some pod within the timeout: every Reservation released, the node uncordoned, nothing evicted).
RESERVING: Final = "Reserving"
MOVING: Final = "Moving"
ROLLED_BACK: Final = "RolledBack"


def node_hash(node: str) -> str:
    """The label value naming a node: 40 hex characters of its name's SHA-256."""
    return hashlib.sha256(node.encode()).hexdigest()[:40]


def drain_job_name(node: str, pod_uid: str) -> str:
    """One job per pod and node: a drain run again finds the jobs it made before."""
    digest = hashlib.sha256(f"{node}/{pod_uid}".encode()).hexdigest()[:20]
    return f"drain-{digest}"


NONE: Final[frozenset[str]] = frozenset()


def lifts_of(annotations: dict[str, str]) -> frozenset[str]:
    """The filters a job's drain lifts (only those a drain may lift)."""
    named = annotations.get(ANNOTATION_LIFTS)
    if not named:
        return NONE  # most jobs: no drain's, nothing lifted
    return frozenset(part.strip() for part in named.split(",")) & LIFTABLE


class DrainOptions(msgspec.Struct, rename="camel", kw_only=True, forbid_unknown_fields=True):
    """kubectl drain's flags that decide which pods move and how."""

    ignore_daemonsets: bool = False
    delete_emptydir_data: bool = False
    force: bool = False
    pod_selector: str | None = None
    timeout: Duration | None = None  # the drain jobs' ttl (default: defaultJobTTL)
    # Room for every pod reserved before any pod is evicted; none found within the timeout: nothing moves.
    atomic: bool = False


class DrainRecord(msgspec.Struct, rename="camel", kw_only=True):
    """What the node keeps of its drain (annotation `podherd.io/drain`)."""

    requester: str
    started_at: str
    cordoned_before: bool
    options: DrainOptions
    jobs: list[str] = msgspec.field(default_factory=list)
    phase: str | None = None  # an atomic drain's: Reserving, Moving or RolledBack
    no_room: list[str] = msgspec.field(default_factory=list)  # rolled back: each pod that found no room, why

    @property
    def began(self) -> datetime:
        return datetime.fromisoformat(self.started_at)


def drain_record(node: Mapping[str, Any] | None) -> DrainRecord | None:
    """The drain a node (as the API server returns it) records, if any."""
    annotations = ((node or {}).get("metadata") or {}).get("annotations") or {}
    text = annotations.get(ANNOTATION_NODE_DRAIN)
    return msgspec.json.decode(text, type=DrainRecord) if text else None
