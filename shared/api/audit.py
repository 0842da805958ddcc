"""The audit stream's records, built one way: each stamped with its time and its actor
(`<service>/<replica>`), and identified deterministically, so a record written twice (a retried publish, a
redelivered message) is stored once.

A record's id is its owner, then what happened: a job's records are `<job uid>/...` (`<uid>/collected`,
`<uid>/status/<digest>`), and a record with no job uid is owned by its action (`intent/<key>/...`,
`drain/<node>/...`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal, TypeAlias

from shared.api.messages import AuditRecord
from shared.api.pmj import Phase

Action: TypeAlias = Literal["decision", "transition", "room-checked", "collected", "intent", "drain", "plan"]


def actor(service: str, replica: str | None) -> str:
    """Who wrote a record: a service's replica, or the service when no one replica acts for it."""
    return f"{service}/{replica}" if replica else service


def audit_record(
    action: Action,
    *about: str,
    by: str,
    job: str | None = None,
    job_uid: str | None = None,
    at: datetime | None = None,
    requester: str | None = None,
    phase: Phase | None = None,
    previous_phase: Phase | None = None,
    rule: str | None = None,
    reason: str | None = None,
    message: str | None = None,
    details: dict[str, str] | None = None,
) -> AuditRecord:
    """One record: `about` are the parts of its id after its owner (the job's uid, else the action)."""
    return AuditRecord(
        id="/".join((job_uid or action, *about)),
        time=at or datetime.now(UTC),
        action=action,
        actor=by,
        job=job,
        job_uid=job_uid,
        requester=requester,
        phase=phase,
        previous_phase=previous_phase,
        rule=rule,
        reason=reason,
        message=message,
        details=details or {},
    )
