"""Waiting out a dependency that stays away (NATS, Redis, the Kubernetes API server): exponential backoff
with a cap and jitter, one log line per failed attempt naming the dependency, its address (credentials
removed) and the reason, a line when it answers again, and the outage as metrics. No traceback: a
dependency that does not answer is not a bug."""

from __future__ import annotations

import asyncio
import logging
import random
import time

from prometheus_client import Counter, Gauge

from shared.core.redact import without_credentials
from shared.core.waits import wait_event

log = logging.getLogger("podherd.dependencies")
UP = Gauge("podherd_dependency_up", "1 while the dependency answers, 0 while it does not", ["dependency"])
FAILURES = Counter(
    "podherd_dependency_failures_total", "Attempts to reach a dependency that failed", ["dependency"]
)
# What an exception without a message is, in words.
WORDS = {"TimeoutError": "no answer in time", "ConnectionRefusedError": "connection refused"}
FIRST_DELAY_S = 0.5
MAX_DELAY_S = 30.0


def delay(
    failures: int, *, first: float = FIRST_DELAY_S, cap: float = MAX_DELAY_S, rng: random.Random
) -> float:
    """Before attempt `failures + 1`: doubling from `first` up to `cap`, each drawn from its upper half (the
    replicas of a service do not come back in step)."""
    ceiling: float = min(cap, first * 2.0 ** max(0, failures - 1))
    return ceiling / 2 + rng.random() * ceiling / 2


class Backoff:
    def __init__(
        self, dependency: str, address: str, *, first: float = FIRST_DELAY_S, cap: float = MAX_DELAY_S
    ) -> None:
        self.dependency, self.address = dependency, without_credentials(address)
        self.first, self.cap = first, cap
        self.failures = 0
        self._up = False  # as the gauge last said (answered on every admission pass: the gauge once)
        self._rng = random.Random()

    def failed(self, reason: BaseException | str) -> float:
        """One line for this failed attempt; the seconds to wait before the next."""
        self.failures += 1
        wait = delay(self.failures, first=self.first, cap=self.cap, rng=self._rng)
        self._up = False
        UP.labels(self.dependency).set(0)
        FAILURES.labels(self.dependency).inc()
        log.warning(
            "%s unreachable at %s: %s; attempt %d, next in %.1fs",
            self.dependency,
            self.address,
            describe(reason),
            self.failures,
            wait,
            extra={"dependency": self.dependency, "attempt": self.failures},
        )
        return wait

    def answered(self) -> None:
        if self._up:
            return
        if self.failures:
            log.info(
                "%s at %s answers again after %d failed attempts",
                self.dependency,
                self.address,
                self.failures,
            )
        self.failures, self._up = 0, True
        UP.labels(self.dependency).set(1)

    async def pause(self, stop: asyncio.Event, reason: BaseException | str) -> bool:
        """Wait before the next attempt; False when `stop` was set meanwhile (give up: the service stops)."""
        return not await wait_event(stop, self.failed(reason))


class SharedBackoff:
    """One dependency that several loops try at once (the watcher's watch of each kind): they wait out the
    same steps, and the dependency costs one line per step, whichever loop fails first in it."""

    def __init__(
        self, dependency: str, address: str, *, first: float = FIRST_DELAY_S, cap: float = MAX_DELAY_S
    ) -> None:
        self.backoff = Backoff(dependency, address, first=first, cap=cap)
        self._step_ends = 0.0  # monotonic: the loops failing before then wait with the one that said it

    def failed(self, reason: BaseException | str) -> float:
        now = time.monotonic()
        if now < self._step_ends:
            return self._step_ends - now
        wait = self.backoff.failed(reason)
        self._step_ends = now + wait
        return wait

    def answered(self) -> None:
        if self.backoff.failures:
            self._step_ends = 0.0
        self.backoff.answered()


def describe(reason: BaseException | str) -> str:
    """A failure in words: the exception's own message (what it is where it has none), credentials
    removed."""
    if isinstance(reason, str):
        return without_credentials(reason)
    text = str(reason).strip() or WORDS.get(type(reason).__name__, type(reason).__name__)
    cause = reason.__cause__ or reason.__context__
    if cause is not None and str(cause).strip() and str(cause).strip() not in text:
        text = f"{text} ({str(cause).strip()})"
    return without_credentials(text)
