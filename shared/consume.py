"""Consuming JetStream the same way in every service: a durable pull consumer shared by the replicas,
explicit acks, bounded redelivery, and undecodable messages terminated and copied to the dead-letter stream.

Consumers are created (or updated) explicitly before binding: nats-py's `pull_subscribe` binds to an existing
durable and silently ignores the configuration passed to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from nats.aio.msg import Msg
from nats.errors import ConnectionClosedError
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from prometheus_client import Counter

from shared.api import codec
from shared.api.codec import SchemaError
from shared.api.messages import DeadLetter
from shared.bus import Subjects
from shared.config import NatsConfig
from shared.durations import parse_duration
from shared.kube import KubeError

log = logging.getLogger(__name__)
DEAD_LETTERS = Counter("podherd_dead_letters_total", "Messages that could not be decoded", ["consumer"])
T = TypeVar("T")
Handler = Callable[[Msg], Awaitable[None]]
BatchHandler = Callable[[list[Msg]], Awaitable[list[BaseException | None]]]


class Retry(Exception):
    """Not now: hand the message back to be redelivered after `delay` seconds (not an error)."""

    def __init__(self, reason: str, delay: float) -> None:
        super().__init__(reason)
        self.delay = delay


async def read_or_retry(read: Awaitable[T], what: str, delay: float) -> T:
    """An API read whose failure is not the message's fault: hand the message back to try later."""
    try:
        return await read
    except KubeError as exc:
        raise Retry(f"{what}: {exc}", delay) from exc


@dataclass(frozen=True)
class Durable:
    """A bound durable pull consumer, and how long a message it delivers may go unacknowledged."""

    sub: Any
    ack_wait: float

    @property
    def heartbeat(self) -> float:
        """How often a message being handled is reported in progress: a few times per ack wait."""
        return max(0.5, self.ack_wait / 3)


async def durable(
    js: JetStreamContext,
    stream: str,
    name: str,
    *,
    filters: Sequence[str],
    config: NatsConfig,
    deliver: DeliverPolicy = DeliverPolicy.ALL,
    max_deliver: int | None = None,
) -> Durable:
    consumer = ConsumerConfig(
        durable_name=name,
        ack_policy=AckPolicy.EXPLICIT,
        deliver_policy=deliver,
        max_deliver=config.max_deliver if max_deliver is None else max_deliver,
        ack_wait=parse_duration(config.ack_wait),
        filter_subjects=list(filters),
        max_ack_pending=20_000,
    )
    await js.add_consumer(stream, consumer)
    sub = await js.pull_subscribe_bind(durable=name, stream=stream)
    return Durable(sub, parse_duration(config.ack_wait))


async def dead_letter(
    js: JetStreamContext, subjects: Subjects, consumer: str, *, msg: Msg, error: SchemaError
) -> None:
    DEAD_LETTERS.labels(consumer).inc()
    letter = DeadLetter(
        subject=msg.subject,
        consumer=consumer,
        error=str(error),
        field=error.field or None,
        received_at=datetime.now(UTC),
        data=bytes(msg.data),
    )
    meta = getattr(msg, "metadata", None)
    msg_id = f"{consumer}/{meta.sequence.stream}" if meta is not None else None
    await js.publish(
        subjects.dead_letter(consumer),
        codec.encode(letter),
        headers={"Nats-Msg-Id": msg_id} if msg_id else None,
    )
    log.warning("dead-lettered a message on %s: %s", msg.subject, error)


def one_by_one(handle: Handler) -> BatchHandler:
    """A per-message handler as a batch handler: each message's outcome is its own."""

    async def handle_batch(messages: list[Any]) -> list[BaseException | None]:
        outcomes: list[BaseException | None] = []
        for msg in messages:
            try:
                await handle(msg)
            except Exception as exc:
                outcomes.append(exc)
            else:
                outcomes.append(None)
        return outcomes

    return handle_batch


def by_key(handle: Handler, key_of: Callable[[Msg], str], *, concurrency: int) -> BatchHandler:
    """A per-message handler over a fetch: the messages of one key in their order, one after another, and
    different keys at the same time, up to `concurrency` (each message's outcome is its own)."""
    slots = asyncio.Semaphore(concurrency)

    async def handle_batch(messages: list[Msg]) -> list[BaseException | None]:
        outcomes: list[BaseException | None] = [None] * len(messages)
        groups: dict[str, list[int]] = {}
        for i, msg in enumerate(messages):
            groups.setdefault(key_of(msg), []).append(i)

        async def in_order(indices: list[int]) -> None:
            async with slots:
                for i in indices:
                    try:
                        await handle(messages[i])
                    except Exception as exc:
                        outcomes[i] = exc

        await asyncio.gather(*(in_order(indices) for indices in groups.values()))
        return outcomes

    return handle_batch


def coalesced(
    note: Callable[[Msg], Awaitable[Iterable[str]]],
    act: Callable[[str], Awaitable[None]],
    *,
    concurrency: int = 1,
) -> BatchHandler:
    """A batch handler for level-triggered work: `note` takes each message in (bookkeeping) and names the
    keys it concerns; then `act` runs once per key the fetch named, however many messages named it, for up
    to `concurrency` keys at a time (started in first-named order; keys are independent of each other).
    Notes run side by side too, those of one subject (one object, one job) in their order. A message's
    outcome is its own note's, else the first failed act of its keys (so a message is redelivered when the
    work it asked for failed)."""
    slots = asyncio.Semaphore(concurrency)

    async def act_on(key: str) -> BaseException | None:
        async with slots:
            try:
                await act(key)
            except Exception as exc:
                return exc
            return None

    async def handle_batch(messages: list[Msg]) -> list[BaseException | None]:
        outcomes: list[BaseException | None] = [None] * len(messages)
        named: list[list[str]] = [[] for _ in messages]
        subjects: dict[str, list[int]] = {}
        for i, msg in enumerate(messages):
            subjects.setdefault(msg.subject, []).append(i)

        async def note_in_order(indices: list[int]) -> None:
            async with slots:
                for i in indices:
                    try:
                        named[i] = list(await note(messages[i]))
                    except Exception as exc:
                        outcomes[i] = exc

        await asyncio.gather(*(note_in_order(indices) for indices in subjects.values()))
        order = list(dict.fromkeys(key for keys in named for key in keys))
        acted = dict(zip(order, await asyncio.gather(*(act_on(key) for key in order)), strict=True))
        for i, keys in enumerate(named):
            if outcomes[i] is None:
                outcomes[i] = next((acted[k] for k in keys if acted[k] is not None), None)
        return outcomes

    return handle_batch


async def run_consumer(
    consumer: Durable,
    js: JetStreamContext,
    subjects: Subjects,
    *,
    name: str,
    handle: BatchHandler,
    stop: asyncio.Event,
    batch: int = 256,
) -> None:
    """Fetch, handle, ack until `stop`. `handle` takes what one fetch returned and says per message how it
    went: None (ack), a SchemaError (undecodable: dead-lettered and terminated, never redelivered) or another
    exception (nak: redelivered after a second, up to `maxDeliver` times). A fetch in hand when stopping is
    handed back (nak) at once.

    While a fetch is being handled its messages are reported in progress every `heartbeat`, so the ack wait
    can be short: a message held by a replica that died (SIGKILL, a lost node) goes to another replica within
    one ack wait, while one that is merely slow to handle is never delivered twice."""
    task = asyncio.current_task()
    while not stop.is_set():
        try:
            messages = await consumer.sub.fetch(batch, timeout=1.0)
        except (TimeoutError, NatsTimeoutError):
            _raise_if_cancelling(task)  # nats-py can turn a cancellation into a fetch timeout
            continue
        except ConnectionClosedError:
            return  # the connection was closed under us: nothing more will come
        except Exception as exc:  # NATS reconnecting: wait and try again
            _raise_if_cancelling(task)
            log.warning("%s: fetch failed: %s", name, exc)
            await asyncio.sleep(0.5)
            continue
        if stop.is_set():
            for msg in messages:
                with contextlib.suppress(Exception):
                    await msg.nak()
            return
        alive = asyncio.create_task(_in_progress(messages, consumer.heartbeat))
        try:
            outcomes = await handle(messages)
        finally:
            alive.cancel()
        for msg, outcome in zip(messages, outcomes, strict=True):
            if outcome is None:
                await msg.ack()
            elif isinstance(outcome, SchemaError):
                await dead_letter(js, subjects, name, msg=msg, error=outcome)
                await msg.term()
            elif isinstance(outcome, Retry):
                log.debug("%s: %s: again in %.1fs", name, outcome, outcome.delay)
                with contextlib.suppress(Exception):
                    await msg.nak(delay=outcome.delay)
            else:
                log.error(
                    "%s: handling a message on %s failed; it will be redelivered: %r",
                    name,
                    msg.subject,
                    outcome,
                    exc_info=outcome,
                )
                with contextlib.suppress(Exception):
                    await msg.nak(delay=1.0)


async def _in_progress(messages: list[Any], every: float) -> None:
    while True:
        await asyncio.sleep(every)
        for msg in messages:
            with contextlib.suppress(Exception):
                await msg.in_progress()


def _raise_if_cancelling(task: asyncio.Task[Any] | None) -> None:
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
