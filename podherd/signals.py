"""Stopping on SIGINT and SIGTERM whatever the parent process left behind.

A process started from a background job of a non-interactive shell, or by `nohup`, inherits SIGINT as
ignored, and Python then installs no KeyboardInterrupt handler; SIGTERM's default action ends the process
without unwinding it. Either way the servers and services a command started would outlive it. So every
`podherd` command takes both signals back: SIGINT raises KeyboardInterrupt, SIGTERM raises `Terminated` (a
KeyboardInterrupt), and the command unwinds, stopping everything it started. Services replace both handlers
with their event loop's own once it runs (`shared.service.runtime.serve`).
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from types import FrameType
from typing import NoReturn


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: unwind as for Ctrl-C."""


def _terminated(signum: int, frame: FrameType | None) -> NoReturn:
    raise Terminated(signal.Signals(signum).name)


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """While the block runs, SIGINT and SIGTERM unwind it; the caller's handlers are restored after."""
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _terminated)
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
