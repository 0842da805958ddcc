"""`podherd submit --wait` shows a job's wait when it starts, not every time the job is looked at again."""

from __future__ import annotations

from datetime import UTC, datetime

from podherd.client import Waits
from shared.api.messages import AuditRecord


def record(action: str, rule: str | None = None, waiting_on: str = "", message: str = "") -> AuditRecord:
    details = {"decision": "deferred", "waitingOn": waiting_on} if action == "deferred" else {}
    return AuditRecord(
        id=f"{action}-{rule}-{message}",
        time=datetime.now(UTC),
        action="decision" if action == "deferred" else action,
        actor="arbitrator/a1",
        job="j1",
        job_uid="u1",
        rule=rule,
        message=message,
        details=details,
    )


def test_a_repeated_wait_is_shown_once_and_a_new_one_again() -> None:
    waits = Waits()
    stream = [
        record("transition", message="Pending"),
        record("deferred", "objectLimiters.workload", "bucket:w", "next token in 599.50s"),
        record("deferred", "objectLimiters.workload", "bucket:w", "next token in 10.00s"),
        record("transition", message="still Pending"),
        record("deferred", "objectLimiters.workload", "bucket:w", "next token in 1.00s"),
        record("deferred", "maxMigratingPerNode", "slot:node:a", "1/1 on node a"),
        record("deferred", "objectLimiters.workload", "bucket:w", "next token in 0.50s"),
    ]
    shown = [r.message for r in stream if waits.news(r)]
    assert shown == [
        "Pending",
        "next token in 599.50s",
        "still Pending",
        "1/1 on node a",
        "next token in 0.50s",
    ]
