"""Semantic checks on a decoded PMJ: what is well-typed JSON but still cannot run.

A PMJ that fails here is not dropped: the tracker ends it `Failed` with the returned reason and message,
which is what a user reading `kubectl get pmj -o yaml` needs to fix it.
"""

from __future__ import annotations

from typing import NamedTuple

from shared.api.pmj import (
    REASON_INVALID_POD_REF,
    REASON_INVALID_RESERVATION,
    REASON_INVALID_SPEC,
    PodMigrationJob,
)
from shared.durations import parse_duration


class Invalid(NamedTuple):
    reason: str
    message: str


def validate_pmj(job: PodMigrationJob) -> Invalid | None:
    """Return why `job` cannot run, or None when it can."""
    ref = job.spec.pod_ref
    if ref is None:
        return Invalid(REASON_INVALID_POD_REF, "spec.podRef is required")
    if ref.kind not in (None, "", "Pod"):
        return Invalid(REASON_INVALID_POD_REF, f"spec.podRef.kind must be Pod, got {ref.kind!r}")
    if not ref.name:
        return Invalid(REASON_INVALID_POD_REF, "spec.podRef.name is required")
    if not ref.namespace:
        return Invalid(REASON_INVALID_POD_REF, "spec.podRef.namespace is required")
    if job.spec.ttl is not None and parse_duration(job.spec.ttl) < 0:
        return Invalid(REASON_INVALID_SPEC, f"spec.ttl must not be negative, got {job.spec.ttl!r}")
    options = job.spec.reservation_options
    if options and options.reservation_ref is not None and not options.reservation_ref.name:
        return Invalid(REASON_INVALID_RESERVATION, "spec.reservationOptions.reservationRef.name is required")
    return None
