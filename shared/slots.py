"""What admitting a job takes, as the rules state it and the ledger applies it (pure types)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Slot:
    """Join set `key`; its members (jobs, plus pods being evicted in the background) stay within `limit`.

    With `replicas`, the slot is a workload's maxUnavailablePerWorkload: what stays within `limit` is the
    workload's unavailability, each job in flight counted once with the replicas missing or not Ready beyond
    them (`unavailable_used` in lua/gates.lua; `limits.evaluate` is the reference)."""

    rule: str
    key: str
    limit: int
    what: str  # for messages: "node node-7"
    replicas: int | None = None


@dataclass(frozen=True)
class Bucket:
    """Take one token from bucket `key` (refilled at `rate` per second up to `burst`)."""

    rule: str
    key: str
    rate: float
    burst: int
    what: str
