"""What admitting a job takes, as the rules state it and the ledger applies it (pure types)."""

from __future__ import annotations

import msgspec

# Slot keys (`<limit>:<scope>`), spelled here only; lua/admit.lua knows the workload prefix too.
GLOBAL = "global"
WORKLOAD_PREFIX = "workload:"


def node_slot(node: str) -> str:
    return f"node:{node}"


def namespace_slot(namespace: str) -> str:
    return f"namespace:{namespace}"


def workload_slot(workload: str) -> str:
    """The slot of a workload, by its key (`Kind/namespace/name`)."""
    return f"{WORKLOAD_PREFIX}{workload}"


def pdb_slot(pdb: str) -> str:
    return f"pdb:{pdb}"


def limit_of(slot_key: str) -> str:
    """Which limit a slot key belongs to: node, namespace, workload, pdb or global."""
    return slot_key.partition(":")[0]


def workload_of(slot_key: str) -> str | None:
    """The workload key a workload slot names; None for other slots."""
    return slot_key.removeprefix(WORKLOAD_PREFIX) if slot_key.startswith(WORKLOAD_PREFIX) else None


class Slot(msgspec.Struct, frozen=True):
    """Join set `key`; its members (jobs, plus pods being evicted in the background) stay within `limit`.

    With `replicas`, the slot is a workload's maxUnavailablePerWorkload: what stays within `limit` is the
    workload's unavailability, each job in flight counted once with the replicas missing or not Ready beyond
    them (`unavailable_used` in lua/parking.lua; `limits.evaluate` is the reference)."""

    rule: str
    key: str
    limit: int
    what: str  # for messages: "node node-7"
    replicas: int | None = None


class Bucket(msgspec.Struct, frozen=True):
    """Take one token from bucket `key` (refilled at `rate` per second up to `burst`)."""

    rule: str
    key: str
    rate: float
    burst: int
    what: str
