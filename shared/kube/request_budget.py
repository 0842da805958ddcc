"""A client's budget of API requests, as client-go's QPS and Burst: after a pause up to `burst` requests
leave at once, and on average no more than `qps` a second. Each request takes its turn in arrival order
(a request over budget waits for the moment its token comes, as Go's rate.Limiter.Wait does), so a busy
replica slows down instead of failing, and the API server's own flow control is the last line, not the
first."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


class RequestBudget:
    def __init__(self, qps: float, burst: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.qps, self.burst, self.clock = qps, burst, clock
        self.tokens = float(burst)
        self.at = clock()

    def take(self) -> float:
        """Take the next token: how long to wait before the request may leave (0: at once)."""
        now = self.clock()
        self.tokens = min(float(self.burst), self.tokens + (now - self.at) * self.qps) - 1.0
        self.at = now
        return 0.0 if self.tokens >= 0 else -self.tokens / self.qps

    async def wait(self) -> None:
        delay = self.take()
        if delay > 0:
            await asyncio.sleep(delay)
