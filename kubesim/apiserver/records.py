"""What kubesim's store keeps: stored objects, the events their changes make, and the watches that see them.

Timestamps are written as the API server writes them (RFC 3339, seconds, UTC).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import msgspec

from kubesim.apiserver.resources import Obj, ResourceType
from shared.api.selectors import LabelMatcher

__all__ = ["Obj"]  # handed on: what the store keeps is typed here for its readers

Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped objects

encode = msgspec.json.Encoder().encode


_LAST_SECOND: list[tuple[int, str]] = [(-1, "")]


def now_iso(at: float | None = None) -> str:
    second = int(time.time() if at is None else at)
    cached = _LAST_SECOND[0]
    if cached[0] != second:  # most writes within a second share the text
        cached = (second, datetime.fromtimestamp(second, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
        _LAST_SECOND[0] = cached
    return cached[1]


def parse_iso(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


@dataclass(slots=True)
class Stored:
    obj: Obj
    raw: bytes


@dataclass(slots=True)
class Event:
    rv: int
    type: str  # ADDED | MODIFIED | DELETED
    rt: ResourceType
    namespace: str
    obj: Obj
    raw: bytes
    old: Obj | None = None
    at: float = field(default_factory=time.time)  # when the change was made (wall clock)


@dataclass(eq=False)
class Watch:
    """One open watch: its filters and a queue of encoded events for the HTTP handler to stream."""

    rt: ResourceType
    namespace: str | None
    labels: LabelMatcher | None
    fields: Callable[[Mapping[str, Any]], bool] | None
    queue: Any = None  # asyncio.Queue[bytes | None], created by the server

    def matches(self, obj: Obj | None) -> bool:
        if obj is None:
            return False
        if self.namespace and obj["metadata"].get("namespace", "") != self.namespace:
            return False
        if self.labels and not self.labels(obj["metadata"].get("labels") or {}):
            return False
        return not (self.fields and not self.fields(obj))


@dataclass
class ResourceObjects:
    """The objects of one resource, with a sorted key list for paginated lists (rebuilt lazily)."""

    objects: dict[Key, Stored] = field(default_factory=dict)
    _sorted: list[Key] | None = None
    changes: int = 0  # bumped on every write: what was derived from these objects is stale when it moves

    def sorted_keys(self) -> list[Key]:
        if self._sorted is None:
            self._sorted = sorted(self.objects)
        return self._sorted

    def put(self, key: Key, stored: Stored) -> None:
        if key not in self.objects:
            self._sorted = None
        self.objects[key] = stored
        self.changes += 1

    def pop(self, key: Key) -> Stored | None:
        self._sorted = None
        self.changes += 1
        return self.objects.pop(key, None)


def translate(watch: Watch, event: Event) -> str | None:
    """The event type this watch sees: an object leaving the selection is DELETED, entering it is ADDED."""
    if watch.namespace and event.namespace != watch.namespace:
        return None
    now_in = event.type != "DELETED" and watch.matches(event.obj)
    if event.type == "DELETED":
        return "DELETED" if watch.matches(event.old or event.obj) else None
    was_in = event.old is not None and watch.matches(event.old)
    if now_in and was_in:
        return "MODIFIED"
    if now_in:
        return "ADDED"
    if was_in:
        return "DELETED"
    return None


def encode_event(event_type: str, raw: bytes) -> bytes:
    return b'{"type":"' + event_type.encode() + b'","object":' + raw + b"}\n"


def controller_ref(meta: Mapping[str, Any]) -> dict[str, Any] | None:
    """The owner reference marked `controller` among an object's (its metadata's), or None."""
    return next((r for r in meta.get("ownerReferences") or [] if r.get("controller")), None)
