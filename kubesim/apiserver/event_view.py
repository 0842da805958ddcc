"""`events.k8s.io/v1` Events: the same objects as core `v1` Events, stored once and seen in either version,
with the fields converted as kube-apiserver converts them (`regarding` is `involvedObject`, `note` is
`message`, `reportingController` is `reportingComponent`, the `deprecated*` fields the old counters and
source); and the stricter validation the API server gives an Event created through `events.k8s.io/v1`."""

from __future__ import annotations

import copy
from collections.abc import Callable

from kubesim.apiserver.errors import FieldError, invalid_fields
from kubesim.apiserver.records import Obj
from kubesim.apiserver.resources import ResourceType

GROUP = "events.k8s.io"
# events.k8s.io/v1 name -> core v1 name; the rest (metadata, action, reason, related, reportingInstance,
# series, type, eventTime) keep theirs.
RENAMED = {
    "regarding": "involvedObject",
    "note": "message",
    "reportingController": "reportingComponent",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
}
CORE_NAMES = {core: new for new, core in RENAMED.items()}
NOTE_LIMIT, INSTANCE_LIMIT, ACTION_LIMIT, REASON_LIMIT = 1024, 128, 128, 128


def is_view(rt: ResourceType) -> bool:
    return rt.group == GROUP and rt.plural == "events"


def to_view(core: Obj) -> Obj:
    """A core v1 Event as events.k8s.io/v1 shows it."""
    out: Obj = {"kind": "Event", "apiVersion": f"{GROUP}/v1"}
    for key, value in core.items():
        if key not in ("kind", "apiVersion"):
            out[CORE_NAMES.get(key, key)] = copy.deepcopy(value)
    if out.get("deprecatedCount") == 0:
        del out["deprecatedCount"]
    out.setdefault("eventTime", None)  # a required MicroTime: Go writes the zero time as null
    return out


def to_core(view: Obj) -> Obj:
    out: Obj = {"kind": "Event", "apiVersion": "v1"}
    for key, value in view.items():
        if key not in ("kind", "apiVersion"):
            out[RENAMED.get(key, key)] = copy.deepcopy(value)
    return out


def converted(apply: Callable[[Obj], Obj]) -> Callable[[Obj], Obj]:
    """A patch written against the events.k8s.io/v1 form, applied to a stored core Event."""
    return lambda core: to_core(apply(to_view(core)))


def check_create(view: Obj) -> None:
    """ValidateEventCreate for a request of events.k8s.io/v1."""
    errors: list[FieldError] = []
    if not view.get("eventTime"):
        errors.append(FieldError("FieldValueRequired", "eventTime"))
    kind = view.get("type")
    if kind not in ("Normal", "Warning"):
        errors.append(FieldError("FieldValueInvalid", "type", "", f"has invalid value: {kind or ''}"))
    for field in ("reportingController", "reportingInstance", "action", "reason"):
        if not view.get(field):
            errors.append(FieldError("FieldValueRequired", field))
    for field, limit in (
        ("note", NOTE_LIMIT),
        ("reportingInstance", INSTANCE_LIMIT),
        ("action", ACTION_LIMIT),
        ("reason", REASON_LIMIT),
    ):
        if len(str(view.get(field) or "")) > limit:
            detail = f"must have at most {limit} bytes"
            errors.append(FieldError("FieldValueTooLong", field, None, detail))
    for field, core in (
        ("deprecatedFirstTimestamp", "firstTimestamp"),
        ("deprecatedLastTimestamp", "lastTimestamp"),
        ("deprecatedCount", "count"),
        ("deprecatedSource", "source"),
    ):
        if view.get(field):
            errors.append(FieldError("FieldValueInvalid", core, "", "needs to be unset"))
    if errors:
        raise invalid_fields("Event", GROUP, (view.get("metadata") or {}).get("name", ""), errors=errors)
