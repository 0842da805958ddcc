"""Which finished jobs the collector deletes: ended ones, `retention` after they ended; none in flight."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from services.tracker.collector.collectable import collectable, ended_at

NOW = datetime(2026, 11, 23, 12, 0, 0, tzinfo=UTC)
RETENTION = 30 * 60.0


def job(phase: str | None, created: str, *transitions: str) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase} if phase else {}
    if transitions:
        status["conditions"] = [{"type": "Eviction", "lastTransitionTime": t} for t in transitions]
    return {"metadata": {"name": "j", "creationTimestamp": created}, "status": status}


@pytest.mark.parametrize(
    ("obj", "collected"),
    [
        (job("Succeeded", "2026-11-23T10:00:00Z", "2026-11-23T11:29:59Z"), True),  # ended 30 min ago
        (job("Failed", "2026-11-23T10:00:00Z", "2026-11-23T11:00:00Z", "2026-11-23T11:30:01Z"), False),
        (job("Aborted", "2026-11-23T11:00:00Z"), True),  # ended with no condition: its creation counts
        (job("Running", "2026-11-22T00:00:00Z", "2026-11-22T00:00:01Z"), False),  # in flight: never
        (job("Pending", "2026-11-22T00:00:00Z"), False),
        (job(None, "2026-11-22T00:00:00Z"), False),  # no status yet: Pending
        (job("Succeeded", "not a time"), False),  # nothing says when: kept
    ],
)
def test_collectable(obj: dict[str, Any], collected: bool) -> None:
    assert collectable(obj, NOW, RETENTION) is collected


def test_ended_at_is_the_last_condition_change() -> None:
    ended = ended_at(job("Succeeded", "2026-11-23T10:00:00Z", "2026-11-23T10:05:00Z", "2026-11-23T10:01:00Z"))
    assert ended == datetime(2026, 11, 23, 10, 5, tzinfo=UTC)
