"""Waiting for a state nothing announces (a metric, a Redis key, a process's port, a JetStream consumer's
counts): look again until it holds, within a deadline, and fail naming what never came. Where an event
exists (a watch, a subscription, an asyncio.Event), tests wait on it instead."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


async def until(
    check: Callable[[], object],
    *,
    within: float,
    what: str,
    every: float = 0.05,
    retry: tuple[type[BaseException], ...] = (),
) -> Any:
    """`check`'s first truthy answer (awaited, if it is awaitable), looked for every `every` seconds; a
    `retry` exception counts as not yet. TimeoutError naming `what` once `within` seconds have passed."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        try:
            answer = check()
            found = await answer if inspect.isawaitable(answer) else answer
        except retry:
            found = None
        if found:
            return found
        if loop.time() > deadline:
            raise TimeoutError(f"{what}: not within {within:g} s")
        await asyncio.sleep(every)


def until_sync(check: Callable[[], T | None], *, within: float, what: str, every: float = 0.05) -> T:
    """`until` for a test without an event loop."""
    deadline = time.monotonic() + within
    while not (found := check()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {within:g} s")
        time.sleep(every)
    return found
