"""Paginated lists as the API server serves them from etcd: a continue token carries the first page's
revision, and later pages show the objects as they were at that revision (410 Gone once it is compacted).
"""

from __future__ import annotations

import base64
import bisect
import itertools
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from kubesim.apiserver.errors import bad_request, gone
from kubesim.apiserver.records import Event, Key, ResourceObjects, Stored, encode
from kubesim.apiserver.resources import ResourceType
from kubesim.apiserver.selectors import parse_field_selector, parse_label_selector


@dataclass(frozen=True, slots=True)
class ListQuery:
    namespace: str | None = None
    label_selector: str | None = None
    field_selector: str | None = None
    limit: int | None = None
    continue_token: str | None = None


@dataclass(frozen=True, slots=True)
class ListPage:
    items: list[bytes]  # the encoded objects
    resource_version: str
    continue_token: str | None
    remaining: int | None  # remainingItemCount, where it is known without filtering


@dataclass(frozen=True, slots=True)
class Revisions:
    """The store's revision state a list is served from."""

    current: int
    compacted: int
    history: Sequence[Event]


def list_page(
    rt: ResourceType, bucket: ResourceObjects, revisions: Revisions, *, query: ListQuery
) -> ListPage:
    labels = parse_label_selector(query.label_selector)
    fields = parse_field_selector(query.field_selector, rt.fields)
    namespace, limit = query.namespace, query.limit
    list_rv = revisions.current
    keys = bucket.sorted_keys()
    start = 0
    at: Callable[[Key], Stored | None] = bucket.objects.get
    if query.continue_token:
        token_rv, after = _decode_continue(query.continue_token)
        if 0 <= token_rv < revisions.compacted:
            # The first page's revision is compacted: the rest only from the latest state, if asked.
            raise gone(_INCONSISTENT_CONTINUE, _encode_continue(-1, after))
        if token_rv >= 0:
            # Later pages show the first page's snapshot, as etcd serves them at its revision.
            list_rv = token_rv
            keys, at = _snapshot(rt, bucket, revisions.history, rv=token_rv)
        start = bisect.bisect_right(keys, after)
    items: list[bytes] = []
    last: Key | None = None
    index = start
    for index in range(start, len(keys)):
        key = keys[index]
        if namespace and key[0] != namespace:
            continue
        stored = at(key)
        if stored is None:
            continue
        if labels and not labels(stored.obj["metadata"].get("labels") or {}):
            continue
        if fields and not fields(stored.obj):
            continue
        items.append(stored.raw)
        last = key
        if limit and len(items) >= limit:
            break
    else:
        index = len(keys)
    if not (limit and last is not None and len(items) >= limit and index + 1 < len(keys)):
        return ListPage(items, str(list_rv), None, None)
    remaining = None
    if not labels and not fields:
        rest: Iterable[Key] = keys[index + 1 :]
        remaining = sum(1 for k in rest if (not namespace or k[0] == namespace) and at(k) is not None)
    return ListPage(items, str(list_rv), _encode_continue(list_rv, last), remaining)


def _snapshot(
    rt: ResourceType, bucket: ResourceObjects, history: Sequence[Event], *, rv: int
) -> tuple[list[Key], Callable[[Key], Stored | None]]:
    """The resource's keys and objects as they were at `rv`: today's, with every later change undone."""
    then: dict[Key, Stored | None] = {}
    first_later = bisect.bisect_right(history, rv, key=lambda event: event.rv)
    for event in itertools.islice(history, first_later, None):
        if event.rt.key != rt.key:
            continue
        key = (event.namespace, event.obj["metadata"]["name"])
        if key not in then:  # the first change after `rv` knows what the object was at `rv`
            old = event.old if event.type != "ADDED" else None
            then[key] = Stored(old, encode(old)) if old is not None else None
    if not then:
        return bucket.sorted_keys(), bucket.objects.get
    keys = sorted(set(bucket.sorted_keys()).union(then))

    def at(key: Key) -> Stored | None:
        return then[key] if key in then else bucket.objects.get(key)

    return keys, at


_INCONSISTENT_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new"
    " list without the continue parameter, or use the continue token in this response to retrieve the"
    " remainder of the results. Continuing with the provided token results in an inconsistent list -"
    " objects that were created, modified, or deleted between the time the first chunk was returned and"
    " now may show up in the list."
)


def _encode_continue(rv: int, after: Key) -> str:
    return base64.urlsafe_b64encode(
        json.dumps({"rv": rv, "ns": after[0], "name": after[1]}).encode()
    ).decode()


def _decode_continue(token: str) -> tuple[int, Key]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()))
        return int(data["rv"]), (str(data["ns"]), str(data["name"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise bad_request(f"invalid continue token: {exc}") from exc
