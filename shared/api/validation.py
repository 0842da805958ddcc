"""Semantic checks on a decoded PMJ: what is well-typed JSON but still cannot run.

A PMJ that fails here is not dropped: the tracker ends it `Failed` with the returned reason and message,
which is what a user reading `kubectl get pmj -o yaml` needs to fix it.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from shared.api.pmj import (
    REASON_INVALID_POD_REF,
    REASON_INVALID_RESERVATION,
    REASON_INVALID_SPEC,
    PodMigrationJob,
)
from shared.core.durations import parse_duration

# Kubernetes' DNS-1123 names: a pod's is a subdomain, a namespace's a label.
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


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
    if not (len(ref.name) <= 253 and _SUBDOMAIN.fullmatch(ref.name)):  # no pod can be named otherwise
        return Invalid(REASON_INVALID_POD_REF, f"spec.podRef.name must be a pod's name, got {ref.name!r}")
    if not (len(ref.namespace) <= 63 and _LABEL.fullmatch(ref.namespace)):
        why = f"spec.podRef.namespace must be a namespace's name, got {ref.namespace!r}"
        return Invalid(REASON_INVALID_POD_REF, why)
    if job.spec.ttl is not None and parse_duration(job.spec.ttl) < 0:
        return Invalid(REASON_INVALID_SPEC, f"spec.ttl must not be negative, got {job.spec.ttl!r}")
    options = job.spec.reservation_options
    if options and options.reservation_ref is not None and not options.reservation_ref.name:
        return Invalid(REASON_INVALID_RESERVATION, "spec.reservationOptions.reservationRef.name is required")
    if options and options.template is not None:
        return _template(options.template.spec or {})
    return None


# The fields of a ReservationSpec the Reservation is built around, and the JSON type each must have.
_TEMPLATE_TYPES = {"template": (dict, "an object (a pod template)"), "owners": (list, "a list of owners")}


def _template(spec: dict[str, Any]) -> Invalid | None:
    """`reservationOptions.template` is a ReservationTemplateSpec: its `spec` a ReservationSpec."""
    where = "spec.reservationOptions.template.spec"
    for field, (kind, what) in _TEMPLATE_TYPES.items():
        value = spec.get(field)
        if value is not None and not isinstance(value, kind):
            return Invalid(REASON_INVALID_SPEC, f"{where}.{field} must be {what}, got {value!r}")
    template = spec.get("template") or {}
    if not isinstance(template.get("spec", {}), dict):
        return Invalid(REASON_INVALID_SPEC, f"{where}.template.spec must be an object (a pod spec)")
    ttl = spec.get("ttl")
    if ttl is not None and _duration(ttl) is None:
        return Invalid(REASON_INVALID_SPEC, f"{where}.ttl must be a duration such as 30m, got {ttl!r}")
    return None


def _duration(value: object) -> float | None:
    """Seconds of a Go duration that is not negative; None for anything else."""
    try:
        seconds = parse_duration(value) if isinstance(value, str) else -1.0
    except ValueError:
        return None
    return seconds if seconds >= 0 else None
