"""Work keyed by what it is about, for consumers that handle several batches of messages at once.

A service reads its consumer continuously (`shared.nats.pull`), so the messages of one object or job may be in
two batches being handled side by side. Two rules keep that correct:
- `InOrder`: work for one key runs one piece at a time, in the order its turns were taken (a job's
  commands, the events of one object), while different keys run side by side;
- `Coalescing`: level-triggered work (reconciling a job from what is there now) runs at most once at a
  time per key; asked for while a run waits to start, it shares that run; asked for while one is running,
  one more run follows it, so whatever was noted before the ask is seen. This is the work queue of
  Kubernetes controllers (a dirty set beside a processing set).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable


class InOrder:
    def __init__(self) -> None:
        self._last: dict[str, asyncio.Future[None]] = {}

    def turn(self, key: str) -> _Turn:
        """A place in `key`'s line, taken now: entering it waits until every earlier turn has ended."""
        ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        before, self._last[key] = self._last.get(key), ended
        return _Turn(self, key, before=before, ended=ended)

    def _ended(self, key: str, ended: asyncio.Future[None]) -> None:
        ended.set_result(None)
        if self._last.get(key) is ended:
            del self._last[key]


class _Turn:
    def __init__(
        self, line: InOrder, key: str, *, before: asyncio.Future[None] | None, ended: asyncio.Future[None]
    ) -> None:
        self._line, self._key, self._before, self._ended = line, key, before, ended

    async def __aenter__(self) -> None:
        if self._before is not None:
            try:
                await asyncio.wait([self._before])  # a cancellation here must not cancel the turn before
            except BaseException:
                self.abandon()
                raise

    async def __aexit__(self, *_: object) -> None:
        self.abandon()

    def abandon(self) -> None:
        """End the turn (once): entered or not, the turns after it may go."""
        if not self._ended.done():
            self._line._ended(self._key, self._ended)


class Coalescing:
    def __init__(self, act: Callable[[str], Awaitable[None]], *, concurrency: int) -> None:
        self._act = act
        self._slots = asyncio.Semaphore(concurrency)
        self._waiting: dict[str, asyncio.Future[BaseException | None]] = {}  # asked for, not started
        self._running: dict[str, asyncio.Future[BaseException | None]] = {}

    async def ask(self, key: str) -> Exception | None:
        """A run of `act(key)` that starts after this call; returns how it ended (None: it succeeded).

        The first caller runs it (so it ends with the caller's task: a stopping service leaves nothing
        running); those asking before it starts wait for it. What ends the process rather than the run (a
        BaseException: a cancellation, an exit) is raised to every caller."""
        run = self._waiting.get(key)
        if run is None:
            run = self._waiting[key] = asyncio.get_running_loop().create_future()
            await self._run(key, run)
        else:
            await asyncio.wait([run])  # not `await run`: a caller giving up must not cancel it for the others
        outcome = run.result()
        if outcome is not None and not isinstance(outcome, Exception):
            raise outcome
        return outcome

    async def _run(self, key: str, run: asyncio.Future[BaseException | None]) -> None:
        outcome: BaseException | None = None
        try:
            before = self._running.get(key)
            if before is not None:
                await asyncio.wait([before])
            async with self._slots:
                del self._waiting[key]  # from now on an ask wants a run after this one
                self._running[key] = run
                await self._act(key)
        except BaseException as exc:  # every caller learns how it ended
            outcome = exc
        finally:
            if self._waiting.get(key) is run:
                del self._waiting[key]
            if self._running.get(key) is run:
                del self._running[key]
            run.set_result(outcome)
