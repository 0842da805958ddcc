"""A watch stream read line by line: the blocking response is read on a thread of its own and its chunks
handed to the event loop, at most `max_chunks_in_flight` at a time, so a slow consumer holds the reader back
instead of letting memory grow."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Protocol

import urllib3

from shared.kube.errors import error_from


class Opener(Protocol):
    def __call__(
        self, method: str, path: str, query: Sequence[tuple[str, str]] = (), *, timeout: Any = 30.0
    ) -> urllib3.BaseHTTPResponse: ...


async def watch_lines(
    open_response: Opener,
    path: str,
    query: Sequence[tuple[str, str]],
    *,
    read_timeout: float,
    max_chunks_in_flight: int = 64,
    opened: Callable[[], None] | None = None,
) -> AsyncIterator[bytes]:
    """Yield complete lines of a watch stream. Ends when the server ends the stream; raises KubeError
    for an error status, and urllib3's ReadTimeoutError when nothing arrived for `read_timeout`.
    `opened` is called (on the loop) once the server has accepted the watch."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes | BaseException | None] = asyncio.Queue()
    slots = threading.Semaphore(max_chunks_in_flight)
    stopping = threading.Event()
    holder: dict[str, urllib3.BaseHTTPResponse] = {}

    def tell(fn: Callable[..., None], *args: Any) -> None:
        """Hand `fn(*args)` to the loop; once the loop is closed (its owner gave up on the reader, which
        was still waiting for the server), nobody is left to tell."""
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(fn, *args)

    def read() -> None:
        try:
            response = open_response("GET", path, query, timeout=(10.0, read_timeout))
            holder["response"] = response
            if response.status >= 300:
                raise error_from(response.status, response.data)
            if opened is not None:
                tell(opened)
            chunks = response.read_chunked() if response.chunked else response.stream(65536)
            for chunk in chunks:
                if stopping.is_set():
                    break
                slots.acquire()
                tell(queue.put_nowait, chunk)
            tell(queue.put_nowait, None)
        except BaseException as exc:
            if not stopping.is_set():
                tell(queue.put_nowait, exc)
        finally:
            held = holder.get("response")
            if held is not None:
                with contextlib.suppress(Exception):
                    held.release_conn()

    # A stream holds its thread for its whole life: a dedicated thread, never the shared executor's
    # few workers (a dozen watches would starve every other blocking call).
    finished: asyncio.Future[None] = loop.create_future()

    def finish() -> None:
        if not finished.done():
            finished.set_result(None)

    def run_reader() -> None:
        try:
            read()
        finally:
            tell(finish)

    threading.Thread(target=run_reader, name=f"watch {path}", daemon=True).start()
    partial = b""
    try:
        while True:
            item = await queue.get()
            if item is None:
                break
            if isinstance(item, BaseException):
                raise item
            slots.release()
            data = partial + item
            lines = data.split(b"\n")
            partial = lines.pop()
            for line in lines:
                if line:
                    yield line
        if partial.strip():
            yield partial
    finally:
        stopping.set()
        slots.release()
        response = holder.get("response")
        if response is not None:
            with contextlib.suppress(Exception):
                response.shutdown()
        with contextlib.suppress(TimeoutError):  # the reader thread ends once its response is shut
            async with asyncio.timeout(5):
                await asyncio.shield(finished)
