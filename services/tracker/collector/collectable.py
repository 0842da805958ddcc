"""Which finished jobs are collected (pure).

Koordinator's scavenger deletes PodMigrationJobs every minute once they are 30 minutes old, in flight or
not. Podherd collects only ended jobs (Succeeded, Failed, Aborted), `retention` after they ended: when the
last of their conditions changed, or, for a job that ended with none, when it was created. A job still in
flight is never collected, however old: its ttl ends it first.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from shared.api.meta import parse_time
from shared.api.pmj import TERMINAL_PHASES


def ended_at(job: Mapping[str, Any]) -> datetime | None:
    """When an ended job ended, as far as its object says; None for a job in flight."""
    status = job.get("status") or {}
    if status.get("phase") not in TERMINAL_PHASES:
        return None
    changed = [t for c in status.get("conditions") or [] if (t := parse_time(c.get("lastTransitionTime")))]
    created = parse_time((job.get("metadata") or {}).get("creationTimestamp"))
    return max(changed) if changed else created


def collectable(job: Mapping[str, Any], now: datetime, retention: float) -> bool:
    ended = ended_at(job)
    return ended is not None and (now - ended).total_seconds() >= retention
