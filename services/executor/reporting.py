"""What the executor tells the tracker about a command (pure): the report and its message id, which
changes with what it says, so a repeated word is stored once and a new one is not lost."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

from shared.api import codec
from shared.api.messages import JobRef, Outcome, Report, Step
from shared.api.pmj import PodMigrationJob


def report_of(
    job: PodMigrationJob,
    step: Step,
    outcome: Outcome,
    *,
    message: str,
    target: str | None,
    policy: str | None = None,
) -> tuple[bytes, str]:
    """(the encoded report, its Nats-Msg-Id)."""
    ref = JobRef(name=job.metadata.name or "", uid=job.metadata.uid or "")
    now = datetime.now(UTC)
    report = Report(
        job=ref, step=step, outcome=outcome, message=message, target=target, policy=policy, reported_at=now
    )
    digest = hashlib.sha1(message.encode()).hexdigest()[:10]
    return codec.encode(report), f"{ref.uid}/{step}/{outcome}/{digest}"
