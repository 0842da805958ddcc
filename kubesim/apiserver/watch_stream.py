"""Watches as the API server streams them: the initial events (or the replay from a resourceVersion), then
changes as they happen, batched; bookmarks when asked; an end at timeoutSeconds or when the server stops;
410 Gone as an ERROR event; rows of a Table when `kubectl get -w` asks for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable

import msgspec
from aiohttp import web

from kubesim.apiserver import tables
from kubesim.apiserver.errors import ApiError
from kubesim.apiserver.http_common import Target, encode, wants_table
from kubesim.apiserver.records import Obj, Watch, encode_event
from kubesim.apiserver.resources import ResourceType
from kubesim.apiserver.selectors import parse_field_selector, parse_label_selector
from kubesim.apiserver.store import Store
from kubesim.options import SimOptions

CLOSE = b""  # queued into every open watch when the server stops, so each ends at once


class WatchStream:
    def __init__(self, store: Store, options: SimOptions) -> None:
        self.store = store
        self.options = options

    def close_all(self) -> None:
        for watch in list(self.store.log.watches):
            if watch.queue is not None:
                watch.queue.put_nowait(CLOSE)

    async def serve(
        self, request: web.Request, t: Target, *, convert: Callable[[Obj], Obj] | None = None
    ) -> web.StreamResponse:
        """Stream the events of `t`'s objects; `convert`: each object as the version asked for shows it."""
        query = request.query
        watch = Watch(
            rt=t.rt,
            namespace=t.namespace,
            labels=parse_label_selector(query.get("labelSelector")),
            fields=parse_field_selector(query.get("fieldSelector"), t.rt.fields),
            queue=asyncio.Queue(),
        )
        as_table = wants_table(request)
        bookmarks = query.get("allowWatchBookmarks") in ("true", "1")
        timeout = (
            float(query["timeoutSeconds"])
            if query.get("timeoutSeconds")
            else self.options.min_request_timeout * (1 + random.random())
        )
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        try:
            initial = self.store.open_watch(watch, query.get("resourceVersion"))
        except ApiError as exc:
            await response.prepare(request)
            await response.write(encode({"type": "ERROR", "object": exc.status()}) + b"\n")
            await response.write_eof()
            return response
        first_table = [True]

        def line(event_type: str, obj: Obj, raw: bytes) -> bytes:
            if convert is not None and not as_table:
                return encode({"type": event_type, "object": convert(obj)}) + b"\n"
            if not as_table:
                return encode_event(event_type, raw)
            body = tables.table(
                t.rt, [obj], obj["metadata"].get("resourceVersion", ""), with_definitions=first_table[0]
            )
            first_table[0] = False
            return encode({"type": event_type, "object": body}) + b"\n"

        try:
            await response.prepare(request)
            chunk: list[bytes] = []
            for event_type, obj, raw in initial:
                chunk.append(line(event_type, obj, raw))
                if len(chunk) >= 500:
                    await response.write(b"".join(chunk))
                    chunk = []
            if chunk:
                await response.write(b"".join(chunk))
            await self._stream(
                response, watch, lifetime=timeout, bookmarks=bookmarks, as_table=as_table, to_line=line
            )
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.store.close_watch(watch)
        with contextlib.suppress(ConnectionResetError, RuntimeError):
            await response.write_eof()
        return response

    async def _stream(
        self,
        response: web.StreamResponse,
        watch: Watch,
        *,
        lifetime: float | None,
        bookmarks: bool,
        as_table: bool,
        to_line: Callable[[str, Obj, bytes], bytes],
    ) -> None:
        deadline = time.monotonic() + lifetime if lifetime else None
        queue: asyncio.Queue[bytes] = watch.queue
        next_bookmark = time.monotonic() + self.options.bookmark_interval
        while True:
            now = time.monotonic()
            wait = next_bookmark - now if bookmarks else 3600.0
            if deadline is not None:
                wait = min(wait, deadline - now)
            if wait <= 0:
                if deadline is not None and time.monotonic() >= deadline:
                    return
                if bookmarks:
                    await response.write(self._bookmark(watch.rt, as_table))
                    next_bookmark = time.monotonic() + self.options.bookmark_interval
                continue
            try:
                async with asyncio.timeout(wait):
                    first = await queue.get()
            except TimeoutError:
                continue
            if first == CLOSE:
                return
            batch = [first]
            while not queue.empty() and len(batch) < 1000:
                batch.append(queue.get_nowait())
            closing = CLOSE in batch
            batch = [line for line in batch if line != CLOSE]
            if as_table:
                batch = [self._as_table_line(watch.rt, line, to_line) for line in batch]
            await response.write(b"".join(batch))
            if closing:
                return

    def _as_table_line(
        self, rt: ResourceType, line: bytes, to_line: Callable[[str, Obj, bytes], bytes]
    ) -> bytes:
        event = msgspec.json.decode(line)
        return to_line(event["type"], event["object"], b"")

    def _bookmark(self, rt: ResourceType, as_table: bool) -> bytes:
        obj = {
            "kind": "Table" if as_table else rt.kind,
            "apiVersion": "meta.k8s.io/v1" if as_table else rt.api_version,
            "metadata": {"resourceVersion": str(self.store.rv)},
        }
        return encode({"type": "BOOKMARK", "object": obj}) + b"\n"
