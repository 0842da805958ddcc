"""A watch's reader thread outlives its loop quietly: a loop closed while the reader still waits for the
server (as a process ends) leaves the reader nobody to tell, and it says nothing. Played in a process of
its own, which ends as such a process does (what the closed loop left pending is its own to drop)."""

from __future__ import annotations

import subprocess
import sys

SCENE = """
import asyncio, threading, urllib3
from shared.kube.stream import watch_lines

entered, release = threading.Event(), threading.Event()

def opener(method, path, query=(), *, timeout=30.0):
    entered.set()
    release.wait(10)  # the server answers only after the loop is gone
    raise urllib3.exceptions.ProtocolError("connection reset")

async def first_line(lines):
    return await anext(lines)

loop = asyncio.new_event_loop()
waiting = loop.create_task(first_line(watch_lines(opener, "/api/v1/pods", [], read_timeout=1.0)))
loop.run_until_complete(asyncio.to_thread(entered.wait, 10))
loop.close()
release.set()
[reader] = [t for t in threading.enumerate() if t.name == "watch /api/v1/pods"]
reader.join(10)
print("reader ended" if not reader.is_alive() else "reader still running", flush=True)
"""


def test_a_reader_still_opening_its_watch_when_the_loop_closes_ends_without_an_error() -> None:
    ran = subprocess.run(
        [sys.executable, "-c", SCENE], check=False, capture_output=True, text=True, timeout=60
    )
    assert ran.stdout.strip() == "reader ended", ran.stderr
    assert "Exception in thread" not in ran.stderr, ran.stderr
