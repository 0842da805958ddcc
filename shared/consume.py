"""Consuming JetStream the same way in every service: a durable pull consumer shared by the replicas,
explicit acks, bounded redelivery, and undecodable messages terminated and copied to the dead-letter stream.

Consumers are created (or updated) explicitly before binding: nats-py's `pull_subscribe` binds to an existing
durable and silently ignores the configuration passed to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any

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

log = logging.getLogger(__name__)
DEAD_LETTERS = Counter("podherd_dead_letters_total", "Messages that could not be decoded", ["consumer"])
Handler = Callable[[Any], Awaitable[None]]


async def durable(
    js: JetStreamContext,
    stream: str,
    name: str,
    filters: Sequence[str],
    config: NatsConfig,
    deliver: DeliverPolicy = DeliverPolicy.ALL,
) -> Any:
    consumer = ConsumerConfig(
        durable_name=name,
        ack_policy=AckPolicy.EXPLICIT,
        deliver_policy=deliver,
        max_deliver=config.max_deliver,
        ack_wait=parse_duration(config.ack_wait),
        filter_subjects=list(filters),
        max_ack_pending=20_000,
    )
    await js.add_consumer(stream, consumer)
    return await js.pull_subscribe_bind(durable=name, stream=stream)


async def dead_letter(
    js: JetStreamContext, subjects: Subjects, consumer: str, msg: Any, error: SchemaError
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


async def run_consumer(
    sub: Any,
    js: JetStreamContext,
    subjects: Subjects,
    name: str,
    handle: Handler,
    stop: asyncio.Event,
    batch: int = 256,
) -> None:
    """Fetch, handle, ack until `stop`; messages in hand when stopping are handed back (nak) at once."""
    while not stop.is_set():
        try:
            messages = await sub.fetch(batch, timeout=1.0)
        except (TimeoutError, NatsTimeoutError):
            continue
        except Exception as exc:  # NATS reconnecting: wait and try again
            log.warning("%s: fetch failed: %s", name, exc)
            await asyncio.sleep(0.5)
            continue
        for index, msg in enumerate(messages):
            if stop.is_set():
                for rest in messages[index:]:
                    with contextlib.suppress(Exception):
                        await rest.nak()
                return
            try:
                await handle(msg)
            except SchemaError as exc:
                await dead_letter(js, subjects, name, msg, exc)
                await msg.term()
                continue
            except Exception:
                log.exception(
                    "%s: handling a message on %s failed; it will be redelivered", name, msg.subject
                )
                with contextlib.suppress(Exception):
                    await msg.nak(delay=1.0)
                continue
            await msg.ack()
