"""Timestamps in built-in objects, as the API server decodes and stores them.

`metav1.Time` keeps whole seconds: "2026-11-27T10:02:03.123456+01:00" is stored "2026-11-27T09:02:03Z".
`metav1.MicroTime` (an Event's `eventTime`, a Lease's `renewTime`) keeps microseconds, in UTC. A value that
does not parse is refused as the API server's decoder refuses it (400, naming the layout it expected). Custom
resources keep theirs verbatim: their schema only checks the format.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import msgspec

from kubesim.apiserver.errors import bad_request
from kubesim.apiserver.resources import ResourceType

# The fields of built-in kinds typed metav1.Time (any depth) and metav1.MicroTime.
TIME_FIELDS = frozenset(
    {
        "creationTimestamp",
        "deletionTimestamp",
        "lastTransitionTime",
        "lastProbeTime",
        "lastHeartbeatTime",
        "lastUpdateTime",
        "startTime",
        "startedAt",
        "finishedAt",
        "firstTimestamp",
        "lastTimestamp",
        "lastScheduleTime",
        "lastSuccessfulTime",
        "completionTime",
        "expirationTimestamp",
    }
)
MICRO_FIELDS = frozenset({"eventTime", "lastObservedTime", "renewTime", "acquireTime"})
_encode = msgspec.json.Encoder().encode
RFC3339 = "2006-01-02T15:04:05Z07:00"
RFC3339_MICRO = "2006-01-02T15:04:05.000000Z07:00"


_VALUES = re.compile(rb'"(' + b"|".join(k.encode() for k in TIME_FIELDS | MICRO_FIELDS) + rb')":"([^"]*)"')
_STORED = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
_STORED_MICRO = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")
_MICRO_KEYS = frozenset(k.encode() for k in MICRO_FIELDS)


def normalize(rt: ResourceType, obj: dict[str, Any]) -> None:
    """Every Time and MicroTime of a built-in object as the server stores it; 400 for one that is not a
    time. Most writes carry only stored forms already: those are found so in one pass over the encoded
    object, without walking it."""
    if rt.crd:
        return
    for key, value in _VALUES.findall(_encode(obj)):
        if not (_STORED_MICRO if key in _MICRO_KEYS else _STORED).fullmatch(value):
            _walk(rt, obj)
            return


def _walk(rt: ResourceType, node: Any) -> None:
    if isinstance(node, list):
        for item in node:
            _walk(rt, item)
        return
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        if isinstance(value, str) and key in TIME_FIELDS:
            node[key] = _parse(rt, value, RFC3339).strftime("%Y-%m-%dT%H:%M:%SZ")
        elif isinstance(value, str) and key in MICRO_FIELDS:
            node[key] = _parse(rt, value, RFC3339_MICRO).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        elif isinstance(value, dict | list):
            _walk(rt, value)


def _parse(rt: ResourceType, text: str, layout: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None or "T" not in text:
        raise bad_request(
            f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
            f'parsing time "{text}" as "{layout}": cannot parse "{text}" as "2006"'
        )
    return parsed.astimezone(UTC)
