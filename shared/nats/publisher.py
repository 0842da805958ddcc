"""Pipelined JetStream publishing (`Publisher`): many publishes in flight, their acks counted as they come."""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import time
from collections import OrderedDict
from contextvars import ContextVar
from typing import Any, TypeVar

import msgspec
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg

from shared.api import codec
from shared.api.messages import AuditRecord

_T = TypeVar("_T")
# How long an ack may take before its publish counts as lost: JetStream answers in milliseconds, a stream
# electing a leader in seconds; under the tracker's reconcile deadline, so a lost ack fails a reconcile once.
ACK_WAIT = 10.0
# How long a publish's failure is kept for the flush of the task that made it (a flush follows its publishes
# at once: it ends within an ack wait of them).
FAILURE_MEMORY_S = 2 * ACK_WAIT
# As nats.go's JetStream publish: a publish answered "no responders" (a stream just created in a cluster, its
# interest not yet across every server; a leader being elected) is sent again, twice, 250 ms apart.
NO_RESPONDERS_RETRIES, NO_RESPONDERS_WAIT = 2, 0.25


class PublishError(Exception):
    """JetStream refused a publish (its error), or no ack came in time."""


class _Ack(msgspec.Struct):
    stream: str = ""
    seq: int = 0
    duplicate: bool = False
    error: dict[str, Any] | None = None


def _ack_failure(data: bytes, headers: dict[str, str] | None) -> str:
    """Why an ack that is not a plain success is a failure: JetStream's error, or what came instead."""
    if not data and headers and headers.get("Status") == "503":
        return "no stream captures the subject (no responders)"
    try:
        ack = msgspec.json.decode(data, type=_Ack)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        return f"unreadable ack: {exc}"
    if ack.error:
        return str(ack.error.get("description") or ack.error)
    return ""


class Publisher:
    """Pipelined JetStream publishing: many publishes in flight, acknowledged asynchronously.

    Messages are written with `nc.publish` and a reply subject on one multiplexed inbox, without yielding
    to the event loop between them, so a burst goes out in a few socket writes and in call order: one
    object's events are stored in order. `flush` waits until every publish so far is acknowledged and raises
    the first failure; the caller then resumes from its last checkpoint (Nats-Msg-Id removes what had
    already been stored). nats-py's own `publish_async` yields to the loop on every message, which costs a
    socket write per message; this is several times faster (bench/watcher_bench.py).

    Tasks sharing a publisher (the executor's and tracker's jobs, side by side) each learn of their own
    publishes' failures: a flush answers for those its task made since its last flush, whichever other
    flush waited for them too; a flush in a task that published nothing (the watcher's checkpoint, beside
    the task that publishes) answers, once, for every publish before it.
    """

    def __init__(self, nc: NatsClient, window: int = 4096) -> None:
        self.nc = nc
        self.window = window
        self.acked = 0
        # Each publish's token (increasing) until its ack comes, oldest first, and what went wrong with those
        # acknowledged as failures: a dict and a heap of waiting flushes rather than a future per publish (a
        # future's callbacks cost more than the publish).
        self._unacked: OrderedDict[int, float] = OrderedDict()  # token -> when it was sent (monotonic)
        # token -> (subject, data, headers, times sent again) until its ack: what a retry sends again.
        self._sent: dict[int, tuple[str, bytes, dict[str, str], int]] = {}
        # Publishes that failed, by token: JetStream's refusal, or given up on (no ack in time; True if the
        # connection was lost meanwhile), each with when it was known.
        self._failures: dict[int, tuple[str, float]] = {}
        self._given_up: dict[int, tuple[bool, float]] = {}
        # The calling task's first publish since its last flush: what its flush answers for starts there.
        self._first_of_task: ContextVar[int | None] = ContextVar(f"publisher-{id(self)}", default=None)
        self._claimed = 0  # the newest publish a flush has answered for
        self._next_waiter = 0
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []  # (up to which token, seq, flush)
        self._prefix = ""
        self._next = 0
        self._sub: Any = None
        self._epoch: int | None = None  # the reconnect count when the oldest unflushed publish was sent
        self._resends: set[asyncio.Task[None]] = set()

    def _reconnects(self) -> int:
        return int(self.nc.stats.get("reconnects", 0))

    async def _ensure_inbox(self) -> None:
        if self._sub is None:
            self._prefix = self.nc.new_inbox()
            self._sub = await self.nc.subscribe(f"{self._prefix}.*", cb=self._on_ack)

    async def _on_ack(self, msg: Msg) -> None:
        tok = msg.subject[len(self._prefix) + 1 :]
        if not tok.isdigit() or int(tok) not in self._unacked:
            return  # not one of ours, or a flush gave up on it already
        data = msg.data
        if not data and msg.headers and msg.headers.get("Status") == "503" and self._again(int(tok)):
            return
        del self._unacked[int(tok)]
        self._sent.pop(int(tok), None)
        failure = (
            _ack_failure(data, msg.headers) if not data.startswith(b'{"stream"') or b'"error"' in data else ""
        )
        if failure:
            self._failures[int(tok)] = (failure, time.monotonic())
        else:
            self.acked += 1
        self._wake_flushes()

    def _again(self, token: int) -> bool:
        """Send a publish answered "no responders" again, in a while, if it has retries left."""
        subject, data, headers, retried = self._sent.get(token, ("", b"", {}, NO_RESPONDERS_RETRIES))
        if retried >= NO_RESPONDERS_RETRIES:
            return False
        self._sent[token] = (subject, data, headers, retried + 1)

        async def resend() -> None:
            await asyncio.sleep(NO_RESPONDERS_WAIT)
            if token in self._unacked:  # else given up on meanwhile: its flush has told its caller
                with contextlib.suppress(Exception):  # unsent: its ack never comes, and ack_wait says so
                    await self.nc.publish(subject, data, reply=f"{self._prefix}.{token}", headers=headers)

        task = asyncio.create_task(resend())
        self._resends.add(task)
        task.add_done_callback(self._resends.discard)
        return True

    def _wake_flushes(self) -> None:
        """Every flush whose publishes are all acknowledged now goes on."""
        oldest = next(iter(self._unacked), None)
        while self._waiters and (oldest is None or self._waiters[0][0] < oldest):
            flush = heapq.heappop(self._waiters)[2]
            if not flush.done():
                flush.set_result(None)

    async def publish(
        self, subject: str, data: bytes, msg_id: str, *, headers: dict[str, str] | None = None
    ) -> None:
        await self._ensure_inbox()
        self._next += 1
        tok = self._next
        self._unacked[tok] = time.monotonic()
        hdrs = {"Nats-Msg-Id": msg_id, **headers} if headers else {"Nats-Msg-Id": msg_id}
        if self._epoch is None:
            self._epoch = self._reconnects()
        if self._first_of_task.get() is None:
            self._first_of_task.set(tok)
        self._sent[tok] = (subject, data, hdrs, 0)
        await self.nc.publish(subject, data, reply=f"{self._prefix}.{tok}", headers=hdrs)
        if len(self._unacked) >= self.window:
            await self.flush()

    async def publish_audit(self, subject: str, record: AuditRecord) -> None:
        """An audit record; its deterministic id de-duplicates a retried write."""
        await self.publish(subject, codec.encode(record), record.id)

    async def flush(self, ack_wait: float = ACK_WAIT) -> int:
        """Wait until every publish made before this call is acknowledged; return how many this flush
        answers for (those since the last flush began); raise the first failure of those the calling task
        made since its last flush (of all before it, if it made none).

        Publishes made while it waits are not waited for (the next flush answers for them), so a flush ends
        however busy the publisher is. An ack that never comes (the server went away mid-flight) is a
        PublishError once `ack_wait` has passed since it was sent: counted from the publish, not from this
        flush, so a flush given up by its caller (a deadline of its own) does not leave the next one waiting
        for the same lost ack again, and again.
        """
        upto, since = self._next, self._claimed
        self._claimed = upto  # a flush that began later answers for the publishes since then
        epoch, self._epoch = self._epoch, None
        first = self._first_of_task.get()
        lost = await self._until_acked(upto, epoch, ack_wait)  # cut short: the next flush answers for them
        self._first_of_task.set(None)
        now = time.monotonic()
        # Every publish up to `upto` still unacknowledged is given up on (its ack, if late, is ignored), those
        # an earlier flush claimed too: that flush may have been cut short by its caller.
        while self._unacked and (oldest := next(iter(self._unacked))) <= upto:
            del self._unacked[oldest]
            self._sent.pop(oldest, None)
            self._given_up[oldest] = (lost, now)
        self._wake_flushes()
        given_up = self._answered(self._given_up, first, upto)
        refused = self._answered(self._failures, first, upto)
        if given_up:
            n = len(given_up)
            if any(dropped for _, (dropped, _) in given_up):
                raise PublishError(f"the NATS connection was lost before {n} publishes were acknowledged")
            raise PublishError(f"{n} publishes were not acknowledged within {ack_wait:.0f}s")
        if refused:
            raise PublishError(refused[0][1][0])
        return upto - since

    def _answered(
        self, failed: dict[int, tuple[_T, float]], first: int | None, upto: int
    ) -> list[tuple[int, tuple[_T, float]]]:
        """The failed publishes a flush answers for, oldest first: its task's since `first`, kept for other
        tasks' flushes that waited for them too; or, with no publishes of its task (`first` None), every one
        up to `upto`, taken (told once). Failures older than FAILURE_MEMORY_S go."""
        horizon = time.monotonic() - FAILURE_MEMORY_S
        for t in [t for t, (_, known) in failed.items() if known < horizon]:
            del failed[t]
        mine = sorted((t, v) for t, v in failed.items() if t <= upto and (first is None or t >= first))
        if first is None:
            for t, _ in mine:
                del failed[t]
        return mine

    async def _until_acked(self, upto: int, epoch: int | None, ack_wait: float) -> bool:
        """Wait until no publish up to `upto` awaits its ack, or `ack_wait` passes; True if the connection
        was lost meanwhile (their acks will never come: the caller retries, Nats-Msg-Id drops repeats)."""
        oldest = next(iter(self._unacked), None)
        if oldest is None or oldest > upto:
            return False
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        self._next_waiter += 1
        heapq.heappush(self._waiters, (upto, self._next_waiter, done))
        deadline = loop.time() + max(0.0, self._unacked[oldest] + ack_wait - time.monotonic())
        try:
            while not done.done() and loop.time() < deadline:
                await asyncio.wait([done], timeout=min(0.25, max(0.0, deadline - loop.time())))
                connected = epoch is not None and self.nc.is_connected
                if not done.done() and connected and self._reconnects() != epoch:
                    return True
            return False
        finally:
            done.cancel()

    async def close(self) -> None:
        for task in self._resends:
            task.cancel()
        if self._sub is not None:
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()
            self._sub = None
