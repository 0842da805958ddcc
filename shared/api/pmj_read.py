"""A PodMigrationJob as Podherd reads it, whatever its author wrote (pure).

The CRD (Koordinator's) has no enums nor patterns: `mode: Teleport` or `ttl: 5 minutes` are stored as
written. Reading never fails on such a job: it comes back with what could be read of it (its metadata and
status) and why it cannot run, in the author's terms (the field, what was written, what is allowed), for the
tracker to end it `Failed` once.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from shared.api.meta import ObjectMeta
from shared.api.pmj import REASON_INVALID_SPEC, PodMigrationJob, PodMigrationJobSpec, PodMigrationJobStatus
from shared.api.validation import Invalid, validate_pmj

# What each field Podherd reads allows, said as a user writes it.
ALLOWED = {
    "spec.mode": "ReservationFirst or EvictDirectly",
    "spec.ttl": "a duration such as 30s, 5m or 1h30m (0 for none)",
    "spec.paused": "true or false",
    "spec.deleteOptions.gracePeriodSeconds": "a whole number of seconds, 0 or more",
    "spec.deleteOptions.propagationPolicy": "Orphan, Background or Foreground",
    "spec.deleteOptions.dryRun": "[All]",
}
KINDS = {
    "object": "an object",
    "array": "a list",
    "str": "a string",
    "int": "a whole number",
    "float": "a number",
    "bool": "true or false",
    "null": "nothing",
}
_PATH = re.compile(r" - at `\$\.?(?P<path>[^`]*)`$")
_EXPECTED = re.compile(r"Expected `(?P<want>[^`]+)`")


def read_pmj(raw: dict[str, Any]) -> tuple[PodMigrationJob, Invalid | None]:
    """The job and why it cannot run (None: it can)."""
    job, unreadable = decode_pmj(raw)
    if unreadable is not None:
        return job, Invalid(REASON_INVALID_SPEC, unreadable)
    return job, validate_pmj(job)


def runnable(raw: dict[str, Any] | None) -> PodMigrationJob | None:
    """The job, unless it is gone (None) or cannot run (None too: the tracker ends it)."""
    if raw is None:
        return None
    job, invalid = read_pmj(raw)
    return job if invalid is None else None


def decode_pmj(raw: Any) -> tuple[PodMigrationJob, str | None]:
    """The job as far as it can be read, and why the rest cannot be (None: all of it can)."""
    try:
        return msgspec.convert(raw, PodMigrationJob), None
    except msgspec.ValidationError as exc:
        return _readable_part(raw if isinstance(raw, dict) else {}), explain(str(exc), raw)


def explain(error: str, raw: Any) -> str:
    """msgspec's `error` about `raw`, as the job's author needs it: `spec.mode: "Teleport" is not allowed;
    use ReservationFirst or EvictDirectly`."""
    found = _PATH.search(error)
    path = found.group("path") if found else ""
    what = error[: found.start()] if found else error
    allowed = ALLOWED.get(re.sub(r"\[\d+\]", "", path))
    if allowed is None:
        expected = _EXPECTED.search(what)
        if expected:
            kinds = [k.strip() for k in expected.group("want").split("|") if k.strip() != "null"]
            allowed = " or ".join(KINDS.get(k, k) for k in kinds)
        elif "Object missing required field" in what:
            return f"{path or 'the job'}: {what.split('`')[1] if '`' in what else 'a field'} is required"
        else:
            allowed = "a valid value"
    value = _at(raw, path)
    written = msgspec.json.encode(value).decode() if value is not _MISSING else "it"
    return f"{path or 'the job'}: {written} is not allowed; use {allowed}"


_MISSING = object()


def _at(raw: Any, path: str) -> Any:
    here = raw
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        if part.startswith("["):
            index = int(part[1:-1])
            here = here[index] if isinstance(here, list) and index < len(here) else _MISSING
        else:
            here = here.get(part, _MISSING) if isinstance(here, dict) else _MISSING
        if here is _MISSING:
            return _MISSING
    return here


def _readable_part(raw: dict[str, Any]) -> PodMigrationJob:
    """The metadata and status of a job whose spec cannot be read (each as far as it can be)."""
    meta = _or_none(raw.get("metadata"), ObjectMeta) or ObjectMeta()
    status = _or_none(raw.get("status"), PodMigrationJobStatus)
    return PodMigrationJob(metadata=meta, spec=PodMigrationJobSpec(), status=status)


def _or_none(value: Any, kind: type[Any]) -> Any:
    try:
        return msgspec.convert(value, kind) if value is not None else None
    except msgspec.ValidationError:
        return None


def pod_of(job: dict[str, Any]) -> str:
    """The pod a job (as plain JSON) names, as namespace/name."""
    ref = (job.get("spec") or {}).get("podRef") or {}
    return f"{ref.get('namespace', '')}/{ref.get('name', '')}"
