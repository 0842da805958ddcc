"""Audit records are built in one place: ids owned by the job's uid or by the action, time and actor
stamped, and no service building one by hand."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from shared.api import codec
from shared.api.audit import actor, audit_record
from shared.api.messages import AuditRecord

ROOT = Path(__file__).resolve().parents[2]


def test_a_job_s_record_is_owned_by_its_uid() -> None:
    at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    record = audit_record(
        "transition", "status", "created", by=actor("tracker", "r1"), job="j", job_uid="u-1", at=at
    )
    assert (record.id, record.actor, record.time, record.job) == ("u-1/status/created", "tracker/r1", at, "j")
    assert codec.decode(codec.encode(record), AuditRecord) == record


def test_a_record_without_a_job_uid_is_owned_by_its_action() -> None:
    record = audit_record("drain", "node-1", "atomic", "Moving", by=actor("tracker", None), message="m")
    assert (record.id, record.actor, record.details) == ("drain/node-1/atomic/Moving", "tracker", {})
    named = audit_record("intent", "key-1", "created", "-", by="tracker/r", job="podherd-abc")
    assert named.id == "intent/key-1/created/-"


def test_the_same_event_twice_has_one_id_and_another_event_another() -> None:
    first = audit_record("collected", by="tracker/a", job_uid="u")
    again = audit_record("collected", by="tracker/b", job_uid="u")
    other = audit_record("collected", by="tracker/a", job_uid="v")
    assert first.id == again.id != other.id


def test_no_service_builds_an_audit_record_by_hand() -> None:
    built = [
        str(path.relative_to(ROOT))
        for package in ("services", "shared", "podherd")
        for path in (ROOT / package).rglob("*.py")
        if re.search(r"(?<!class )\bAuditRecord\(", path.read_text())
    ]
    assert built == ["shared/api/audit.py"]
