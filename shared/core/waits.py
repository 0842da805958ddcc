"""Waiting with a time limit without losing a cancellation.

On Python 3.11 `asyncio.wait_for` swallows a cancellation that arrives in the same loop iteration as the
awaited thing completes: it returns the result, and a loop around it goes on waiting. A controller or
service loop stopped by `task.cancel()` then never ends, and its process hangs on SIGTERM (seen under CPU
load). `asyncio.timeout` has no such window, so every timed wait goes through it (ruff bans `wait_for`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any


async def wait_event(event: asyncio.Event, seconds: float | None) -> bool:
    """Wait until `event` is set (True) or `seconds` pass (False); a cancellation always propagates."""
    if event.is_set():
        return True
    try:
        async with asyncio.timeout(seconds):
            await event.wait()
    except TimeoutError:
        return False
    return True


# A task still running this long after its cancellation is cancelled again (see `cancel_and_wait`).
RECANCEL_S = 1.0


async def cancel_and_wait(*tasks: asyncio.Future[Any] | None) -> None:
    """Cancel `tasks` and wait until each has ended, without raising their outcomes (they count as
    retrieved). `suppress(CancelledError)` around `await task` would also swallow a cancellation of the
    caller itself; here that one propagates. A task still running RECANCEL_S after its cancellation is
    cancelled again: a library's own `asyncio.wait_for` (nats-py's requests) swallows, on Python 3.11, a
    cancellation that arrives as its answer does, and a renewing or publishing loop then runs on for good."""
    started = {task for task in tasks if task is not None}
    pending = started
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=RECANCEL_S)
    for task in started:
        if not task.cancelled():
            task.exception()


def when_set(event: asyncio.Event, then: Callable[[], None]) -> asyncio.Task[Any]:
    """Call `then()` once `event` is set, e.g. to wake a loop that waits on something else when it should
    stop (cancel the returned task once that no longer matters)."""
    task = asyncio.create_task(event.wait())
    task.add_done_callback(lambda done: None if done.cancelled() else then())
    return task
