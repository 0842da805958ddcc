"""A watch's reader thread outlives its loop quietly: a loop closed while the reader still waits for the
server (as a process or a test ends) leaves the reader nobody to tell, and it says nothing."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

import urllib3

from shared.kube_stream import watch_lines


def test_a_reader_still_opening_its_watch_when_the_loop_closes_ends_without_an_error() -> None:
    entered, release = threading.Event(), threading.Event()
    failures: list[BaseException | None] = []

    def opener(
        method: str, path: str, query: Sequence[tuple[str, str]] = (), *, timeout: Any = 30.0
    ) -> urllib3.BaseHTTPResponse:
        entered.set()
        release.wait(10)  # the server answers only after the loop is gone
        raise urllib3.exceptions.ProtocolError("connection reset")

    loop = asyncio.new_event_loop()
    lines = watch_lines(opener, "/api/v1/pods", [("watch", "1")], read_timeout=1.0)

    async def first_line() -> bytes:
        return await anext(lines)

    loop.create_task(first_line())  # noqa: RUF006 - the loop is closed under it, as at a process's end
    loop.run_until_complete(asyncio.to_thread(entered.wait, 10))
    loop.close()
    previous = threading.excepthook
    threading.excepthook = lambda args: failures.append(args.exc_value)
    try:
        release.set()
        [reader] = [t for t in threading.enumerate() if t.name == "watch /api/v1/pods"]
        reader.join(10)
    finally:
        threading.excepthook = previous
    assert not reader.is_alive() and failures == []
