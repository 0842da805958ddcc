"""A job whose spec cannot run ends `Failed` at once, and once (pure): its reason and message say which field
and what is allowed (`shared.api.pmj_read`). Nothing was reserved or evicted for it; whatever it may hold in
the ledger is released. An ended job is left as it is."""

from __future__ import annotations

from services.tracker.jobs.machine import RELEASE
from services.tracker.jobs.views import Step
from shared.api.pmj import (
    PHASE_FAILED,
    STATUS_COMPLETE,
    TERMINAL_PHASES,
    PodMigrationJob,
    PodMigrationJobStatus,
)
from shared.api.validation import Invalid


def end_invalid(job: PodMigrationJob, invalid: Invalid) -> Step:
    old = job.status
    if old is not None and old.phase in TERMINAL_PHASES:
        return Step(old)
    status = PodMigrationJobStatus(
        phase=PHASE_FAILED,
        status=STATUS_COMPLETE,
        reason=invalid.reason,
        message=invalid.message,
        conditions=old.conditions if old is not None else None,
    )
    return Step(status, (RELEASE,), [("Warning", invalid.reason, invalid.message)])
