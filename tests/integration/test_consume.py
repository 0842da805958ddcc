"""The consume loop every service uses, on a real JetStream: a slow handler keeps its messages (they are
reported in progress while it works), so a short ack wait never hands work being done to a second replica."""

from __future__ import annotations

import asyncio
from typing import Any

import nats
import pytest
import redis.exceptions

from shared.config.model import NatsConfig
from shared.nats.bus import Subjects
from shared.nats.consume import by_key, durable, one_by_one, run_consumer
from tests.conftest import NatsScope

pytestmark = [pytest.mark.integration]


async def test_a_handler_slower_than_the_ack_wait_is_not_redelivered_to_another_replica(
    nats_scope: NatsScope,
) -> None:
    stream, subject = nats_scope.stream("WORK"), nats_scope.subject("work", "one")
    await nats_scope.js.add_stream(name=stream, subjects=[nats_scope.subject("work", ">")])
    config = NatsConfig(url="unused", subject_prefix=nats_scope.prefix, ack_wait="1s")
    subjects = Subjects(nats_scope.prefix)
    assert nats_scope.nc.connected_url is not None
    url = nats_scope.nc.connected_url.geturl()
    busy, other = await nats.connect(url), await nats.connect(url)
    started, finished, stop = asyncio.Event(), asyncio.Event(), asyncio.Event()
    deliveries: list[tuple[str, int]] = []

    async def slow(msg: Any) -> None:
        deliveries.append(("busy", msg.metadata.num_delivered))
        started.set()
        await asyncio.sleep(3.5)  # the work itself: three and a half ack waits
        finished.set()

    async def idle(msg: Any) -> None:
        deliveries.append(("other", msg.metadata.num_delivered))

    first = await durable(busy, stream, "workers", filters=[subject], config=config)
    working = asyncio.create_task(
        run_consumer(first, busy.jetstream(), subjects, name="workers", handle=one_by_one(slow), stop=stop)
    )
    await nats_scope.js.publish(subject, b"job")
    async with asyncio.timeout(10):
        await started.wait()
    second = await durable(other, stream, "workers", filters=[subject], config=config)
    watching = asyncio.create_task(
        run_consumer(second, other.jetstream(), subjects, name="workers", handle=one_by_one(idle), stop=stop)
    )
    async with asyncio.timeout(30):
        await finished.wait()
    stop.set()  # the loop acknowledges what it handled, then ends
    await asyncio.gather(working, watching)
    info = await nats_scope.js.consumer_info(stream, "workers")
    await busy.close()
    await other.close()
    assert (info.num_ack_pending, info.num_pending, info.num_redelivered) == (0, 0, 0)
    assert deliveries == [("busy", 1)]


async def test_a_slow_message_holds_up_no_other_and_stopping_finishes_what_is_in_hand(
    nats_scope: NatsScope,
) -> None:
    stream = nats_scope.stream("WORK")
    await nats_scope.js.add_stream(name=stream, subjects=[nats_scope.subject("work", ">")])
    config = NatsConfig(url="unused", subject_prefix=nats_scope.prefix, ack_wait="30s")
    subjects = Subjects(nats_scope.prefix)
    slow_started, release, stop, fast_done = (
        asyncio.Event(),
        asyncio.Event(),
        asyncio.Event(),
        asyncio.Event(),
    )
    handled: list[str] = []

    async def handle(msg: Any) -> None:
        if msg.data == b"slow":
            slow_started.set()
            async with asyncio.timeout(30):
                await release.wait()
        handled.append(msg.data.decode())
        if len(handled) == 3:
            fast_done.set()

    consumer = await durable(
        nats_scope.nc, stream, "workers", filters=[nats_scope.subject("work", ">")], config=config
    )
    handle_batch = by_key(handle, lambda m: m.subject, concurrency=8)
    loop = asyncio.create_task(
        run_consumer(
            consumer,
            nats_scope.js,
            subjects,
            name="workers",
            handle=handle_batch,
            stop=stop,
            batches_at_once=8,
        )
    )
    await nats_scope.js.publish(nats_scope.subject("work", "a"), b"slow")
    async with asyncio.timeout(10):
        await slow_started.wait()
    for i in range(3):  # each arrives on its own, while the slow one is still in hand
        await nats_scope.js.publish(nats_scope.subject("work", f"b{i}"), f"fast-{i}".encode())
    async with asyncio.timeout(10):
        await fast_done.wait()
    assert handled == ["fast-0", "fast-1", "fast-2"]
    stop.set()  # stopping while the slow one is in hand: it is finished and acknowledged, not dropped
    release.set()
    async with asyncio.timeout(10):
        await loop
    info = await nats_scope.js.consumer_info(stream, "workers")
    assert handled[-1] == "slow"
    assert (info.num_ack_pending, info.num_pending, info.num_redelivered) == (0, 0, 0)


async def test_a_handler_waiting_on_a_dependency_is_one_line_and_a_bug_keeps_its_traceback(
    nats_scope: NatsScope, caplog: pytest.LogCaptureFixture
) -> None:
    stream = nats_scope.stream("WORK")
    await nats_scope.js.add_stream(name=stream, subjects=[nats_scope.subject("work", ">")])
    config = NatsConfig(url="unused", subject_prefix=nats_scope.prefix)
    subjects = Subjects(nats_scope.prefix)
    seen: dict[str, int] = {}
    both = asyncio.Event()

    async def handle(msg: Any) -> None:
        kind = msg.subject.rsplit(".", 1)[-1]
        seen[kind] = seen.get(kind, 0) + 1
        if all(seen.get(k, 0) >= 2 for k in ("away", "bug")):
            both.set()
        if kind == "away":
            raise redis.exceptions.ConnectionError(
                "Error 111 connecting to 127.0.0.1:6379. Connection refused."
            )
        raise KeyError("a bug")

    consumer = await durable(
        nats_scope.nc, stream, "workers", filters=[nats_scope.subject("work", ">")], config=config
    )
    stop = asyncio.Event()
    running = asyncio.create_task(
        run_consumer(consumer, nats_scope.js, subjects, name="workers", handle=one_by_one(handle), stop=stop)
    )
    for kind in ("away", "bug"):
        await nats_scope.js.publish(nats_scope.subject("work", kind), b"job")
    async with asyncio.timeout(30):
        await both.wait()  # each handled, refused, and delivered again
    stop.set()
    await running
    away = [
        r
        for r in caplog.records
        if r.getMessage().startswith("workers: a message on") and "away" in r.getMessage()
    ]
    assert away and all(r.exc_info is None and "Connection refused" in r.getMessage() for r in away)
    bugs = [
        r for r in caplog.records if "handling a message on" in r.getMessage() and "bug" in r.getMessage()
    ]
    assert bugs and all(r.exc_info is not None for r in bugs)
