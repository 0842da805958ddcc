"""Consuming JetStream the same way in every service: a durable pull consumer shared by the replicas,
explicit acks, bounded redelivery, and undecodable messages terminated and copied to the dead-letter stream.

Consumers are created (or updated) explicitly before they are read: nats-py's `pull_subscribe` binds to an
existing durable and silently ignores the configuration passed to it. Messages are read as they arrive
(`shared.nats.pull`), not fetched batch by batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.errors import ConnectionClosedError
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from prometheus_client import Counter

from shared.api import codec
from shared.api.codec import SchemaError
from shared.api.messages import DeadLetter
from shared.config.model import NatsConfig
from shared.core.backoff import describe
from shared.core.durations import parse_duration
from shared.core.waits import when_set
from shared.kube.client import KubeError
from shared.nats.bus import Subjects
from shared.nats.keyed import Coalescing, InOrder
from shared.nats.publisher import PublishError
from shared.nats.pull import PullConsumer
from shared.redis.client import OUTAGE

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
    """A durable pull consumer being read, and how long a message it delivers may go unacknowledged."""

    pull: PullConsumer
    ack_wait: float

    @property
    def heartbeat(self) -> float:
        """How often a message being handled is reported in progress: a few times per ack wait."""
        return max(0.5, self.ack_wait / 3)


async def durable(
    nc: NatsClient,
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
    await nc.jetstream().add_consumer(stream, consumer)
    pull = PullConsumer(nc, stream, name)
    await pull.start()
    return Durable(pull, parse_duration(config.ack_wait))


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
    """A per-message handler: the messages of one key in their order, one after another (across batches
    handled at once too), and different keys at the same time, up to `concurrency` (each message's outcome
    is its own)."""
    line, slots = InOrder(), asyncio.Semaphore(concurrency)

    async def handle_batch(messages: list[Msg]) -> list[BaseException | None]:
        return await _in_lines(messages, key_of, handle, line=line, slots=slots)

    return handle_batch


def coalesced(
    note: Callable[[Msg], Awaitable[Iterable[str]]],
    act: Callable[[str], Awaitable[None]],
    *,
    concurrency: int = 1,
    runs: Coalescing | None = None,
) -> BatchHandler:
    """A batch handler for level-triggered work: `note` takes each message in (bookkeeping) and names the
    keys it concerns; then `act` runs once per key the batch named, however many messages named it, for up
    to `concurrency` keys at a time, and never twice at once for one key (`Coalescing`: a key named while
    its run waits to start shares it). Notes run side by side too, those of one subject (one object, one
    job) in their order, across batches handled at once as well. A message's outcome is its own note's,
    else the first failed act of its keys (so a message is redelivered when the work it asked for
    failed). Consumers whose messages name the same keys share `runs` (made for `act`, else made here)."""
    line, slots = InOrder(), asyncio.Semaphore(concurrency)
    runs = runs or Coalescing(act, concurrency=concurrency)

    async def handle_batch(messages: list[Msg]) -> list[BaseException | None]:
        named: dict[int, list[str]] = {}

        async def take_in(msg: Msg) -> None:
            named[id(msg)] = list(await note(msg))

        outcomes = await _in_lines(messages, _subject_of, take_in, line=line, slots=slots)
        keys = list(dict.fromkeys(key for msg in messages for key in named.get(id(msg), ())))
        shared = runs
        acted = dict(zip(keys, await asyncio.gather(*(shared.ask(key) for key in keys)), strict=True))
        for i, msg in enumerate(messages):
            if outcomes[i] is None:
                outcomes[i] = next((acted[k] for k in named.get(id(msg), ()) if acted[k] is not None), None)
        return outcomes

    return handle_batch


def _subject_of(msg: Msg) -> str:
    return msg.subject


async def _in_lines(
    messages: list[Msg],
    key_of: Callable[[Msg], str],
    work: Handler,
    *,
    line: InOrder,
    slots: asyncio.Semaphore,
) -> list[BaseException | None]:
    """`work` for each message, those of one key in their order behind the turns earlier batches took,
    each message's outcome its own."""
    outcomes: list[BaseException | None] = [None] * len(messages)
    groups: dict[str, list[int]] = {}
    for i, msg in enumerate(messages):
        groups.setdefault(key_of(msg), []).append(i)
    turns = {key: line.turn(key) for key in groups}  # taken before anything is awaited: batch order holds

    async def in_turn(key: str, indices: list[int]) -> None:
        async with turns[key], slots:
            for i in indices:
                try:
                    await work(messages[i])
                except Exception as exc:
                    outcomes[i] = exc

    try:
        await asyncio.gather(*(in_turn(key, indices) for key, indices in groups.items()))
    finally:
        for turn in turns.values():  # one never entered (cancelled first) must not hold its line
            turn.abandon()
    return outcomes


async def run_consumer(
    consumer: Durable,
    js: JetStreamContext,
    subjects: Subjects,
    *,
    name: str,
    handle: BatchHandler,
    stop: asyncio.Event,
    batch: int = 256,
    batches_at_once: int = 1,
    linger: float = 0.0,
    durable: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Take what has arrived, handle it, ack, until `stop`. `handle` takes up to `batch` messages that
    arrived together and says per message how it went: None (ack), a SchemaError (undecodable:
    dead-lettered and terminated, never redelivered) or another exception (nak: redelivered after a second,
    up to `maxDeliver` times). With `batches_at_once` above 1, the next batch is taken while earlier ones
    are still being handled (the handler keeps what must stay in order in order: `by_key`, `coalesced`),
    so one slow message holds up no other. `linger`: how long a batch waits, once its first message is
    in, for more to come with it (for a handler whose cost is mostly per batch). On `stop`, batches being
    handled are finished and acknowledged; messages that arrived and were not taken are handed back (nak)
    at once.

    Messages in hand are reported in progress every `heartbeat`, so the ack wait can be short: a message
    held by a replica that died (SIGKILL, a lost node) goes to another replica within one ack wait, while
    one that is merely slow to handle is never delivered twice.

    `durable`: awaited before a batch is acknowledged (shared.redis.durable: Redis replicas hold what
    handling it wrote); when it fails, the batch is handed back instead, so a failover cannot lose a
    message's effects after the message itself was acknowledged."""
    task = asyncio.current_task()
    in_hand: dict[int, Msg] = {}
    room = asyncio.Semaphore(batches_at_once)

    async def handled(messages: list[Msg]) -> None:
        try:
            outcomes = await handle(messages)
            if durable is not None and any(o is None for o in outcomes):
                try:
                    await durable()
                except Exception as exc:  # not held by replicas: redelivered, handled again
                    log.warning("%s: a batch's effects are not durable, handed back: %s", name, exc)
                    outcomes = [exc if o is None else o for o in outcomes]
            confirm = stop.is_set()  # the last acks before the loop ends: confirmed by the server
            for msg, outcome in zip(messages, outcomes, strict=True):
                await _settle(js, subjects, name, msg=msg, outcome=outcome, confirm=confirm)
        finally:
            room.release()
            for msg in messages:
                in_hand.pop(id(msg), None)
            await consumer.pull.done(len(messages))

    alive = asyncio.create_task(_in_progress(consumer, in_hand))
    stopping = when_set(stop, consumer.pull.interrupt)  # a wait for messages ends with it, not a second later
    try:
        async with asyncio.TaskGroup() as group:  # a batch failing (a bug) takes the loop down with it
            while not stop.is_set():
                await room.acquire()  # taken when there is room: whatever arrived meanwhile comes with it
                try:
                    messages = await consumer.pull.batch(batch, wait=1.0, linger=linger)
                except ConnectionClosedError:
                    return  # the connection was closed under us: nothing more will come
                except Exception as exc:  # NATS reconnecting, or the consumer refused: wait, ask again
                    room.release()
                    _raise_if_cancelling(task)
                    log.warning("%s: reading the consumer failed: %s", name, exc)
                    await asyncio.sleep(0.5)
                    continue
                if not messages or stop.is_set():
                    room.release()
                    await _hand_back(messages)
                    await consumer.pull.done(len(messages))
                    continue
                in_hand.update((id(msg), msg) for msg in messages)
                group.create_task(handled(messages))
    finally:
        alive.cancel()
        stopping.cancel()
        await _hand_back(await consumer.pull.close())
        await consumer.pull.flush()  # the acks and naks are at the server before the loop says it is done


async def _settle(
    js: JetStreamContext,
    subjects: Subjects,
    name: str,
    *,
    msg: Msg,
    outcome: BaseException | None,
    confirm: bool = False,
) -> None:
    """`confirm`: an ack the server confirms it took (stopping: the loop returns with every message it
    handled acknowledged, not merely sent)."""
    if outcome is None and confirm:
        try:
            await msg.ack_sync(timeout=5)
        except Exception as exc:  # not confirmed (the connection going): the server redelivers it
            log.debug("%s: an ack was not confirmed: %s", name, exc)
    elif outcome is None:
        await msg.ack()
    elif isinstance(outcome, SchemaError):
        await dead_letter(js, subjects, name, msg=msg, error=outcome)
        await msg.term()
    elif isinstance(outcome, Retry):
        log.debug("%s: %s: again in %.1fs", name, outcome, outcome.delay)
        with contextlib.suppress(Exception):
            await msg.nak(delay=outcome.delay)
    elif _outage(outcome):  # a dependency away, not a bug: one line, and the message again in a second
        log.warning(
            "%s: a message on %s waits for %s; it will be redelivered", name, msg.subject, describe(outcome)
        )
        with contextlib.suppress(Exception):
            await msg.nak(delay=1.0)
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


def _outage(error: BaseException) -> bool:
    """Redis, NATS or the API server not answering (for now), as opposed to a bug."""
    if isinstance(error, KubeError):
        return error.retryable
    return isinstance(error, (*OUTAGE, PublishError))


async def _hand_back(messages: Iterable[Msg]) -> None:
    """Stopping: what was received and not handled goes back at once, for another replica."""
    for msg in messages:
        with contextlib.suppress(Exception):
            await msg.nak()


async def _in_progress(consumer: Durable, in_hand: dict[int, Msg]) -> None:
    """Messages in hand, and those arrived behind them, reported in progress every heartbeat."""
    while True:
        await asyncio.sleep(consumer.heartbeat)
        for msg in [*in_hand.values(), *consumer.pull.waiting()]:
            with contextlib.suppress(Exception):
                await msg.in_progress()


def _raise_if_cancelling(task: asyncio.Task[Any] | None) -> None:
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
