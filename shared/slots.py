"""What admitting a job takes, as the rules state it and the ledger applies it (pure types)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Slot:
    """Join set `key`; its members (jobs, plus pods being evicted in the background) stay within `limit`."""

    rule: str
    key: str
    limit: int
    what: str  # for messages: "node node-7"


@dataclass(frozen=True)
class Bucket:
    """Take one token from bucket `key` (refilled at `rate` per second up to `burst`)."""

    rule: str
    key: str
    rate: float
    burst: int
    what: str
