"""Reading a durable consumer as messages arrive (`shared.nats.pull`), on a real JetStream.

Two replicas share a consumer, as the services' replicas do. nats-py's `fetch` held a message that arrived
while the other replica's request waited (the server refuses a second no-wait request with `408 Requests
Pending`, and nats-py then waits for a full batch or its timeout): here each message is handed over as it
comes. A replica takes no more than its window, requests lost to a server restart are asked for again, and a
deleted consumer is an error, not a silent stall."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import nats
import pytest
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig

from podherd.harness.servers import nats_server
from shared.nats.pull import PullConsumer, PullError
from tests.conftest import NatsScope
from tests.polling import until

pytestmark = [pytest.mark.integration]
WAIT = 10.0  # what each read may wait for its first message: far beyond a local delivery


async def consumer_on(nc: NatsClient, stream: str, subjects: list[str]) -> None:
    config = ConsumerConfig(durable_name="workers", ack_policy=AckPolicy.EXPLICIT, ack_wait=30)
    await nc.jetstream().add_stream(name=stream, subjects=subjects)
    await nc.jetstream().add_consumer(stream, config)


async def test_two_replicas_hand_over_each_message_as_it_arrives(nats_scope: NatsScope) -> None:
    stream = nats_scope.stream("WORK")
    await consumer_on(nats_scope.nc, stream, [nats_scope.subject("work", ">")])
    replicas = [PullConsumer(nats_scope.nc, stream, "workers") for _ in range(2)]
    for replica in replicas:
        await replica.start()
    received: asyncio.Queue[tuple[str, float]] = asyncio.Queue()

    async def read(replica: PullConsumer) -> None:
        while True:
            for msg in await replica.batch(256, WAIT):
                await msg.ack()
                await received.put((msg.data.decode(), time.monotonic()))
                await replica.done(1)

    readers = [asyncio.create_task(read(r)) for r in replicas]
    try:
        waits = []
        for i in range(8):  # bursts of three, each once the last was handed over: both replicas wait idle
            sent = time.monotonic()
            for k in range(3):
                await nats_scope.js.publish(nats_scope.subject("work", str(i)), f"{i}.{k}".encode())
            async with asyncio.timeout(WAIT):
                burst = [await received.get() for _ in range(3)]
            assert sorted(data for data, _ in burst) == [f"{i}.{k}" for k in range(3)]
            waits += [at - sent for _, at in burst]
        # Handed over on arrival: nats-py's fetch held the second and third of the first burst for its
        # whole wait.
        assert max(waits) < WAIT / 4, waits
    finally:
        for task in readers:
            task.cancel()
        await asyncio.gather(*readers, return_exceptions=True)
        for replica in replicas:
            assert await replica.close() == []


async def test_a_replica_holds_no_more_than_its_window(nats_scope: NatsScope) -> None:
    stream = nats_scope.stream("WORK")
    await consumer_on(nats_scope.nc, stream, [nats_scope.subject("work", ">")])
    for i in range(10):
        await nats_scope.js.publish(nats_scope.subject("work", str(i)), str(i).encode())
    replica = PullConsumer(nats_scope.nc, stream, "workers", window=4)
    await replica.start()
    first = await replica.batch(256, WAIT)
    while len(first) < 4:  # the window's messages may come in more than one read
        first += await replica.batch(256, WAIT)
    assert [m.data for m in first] == [str(i).encode() for i in range(4)]
    assert await replica.batch(256, 0.5) == []  # nothing more while four are in hand
    info = await nats_scope.js.consumer_info(stream, "workers")
    assert (info.num_ack_pending, info.num_pending) == (4, 6)  # the rest is left for other replicas
    for msg in first:
        await msg.ack()
    await replica.done(len(first))
    rest: list[Msg] = []
    while len(rest) < 6:
        taken = await replica.batch(256, WAIT)
        assert taken and len(taken) <= 4
        for msg in taken:
            await msg.ack()
        await replica.done(len(taken))
        rest += taken
    assert [m.data for m in rest] == [str(i).encode() for i in range(4, 10)]
    assert await replica.close() == []


async def test_requests_lost_to_a_server_restart_are_asked_for_again(tmp_path: Path) -> None:
    server = nats_server(tmp_path / "nats")
    nc = await nats.connect(server.url, max_reconnect_attempts=-1, reconnect_time_wait=0.2)
    try:
        await consumer_on(nc, "RESTART", ["restart.>"])
        replica = PullConsumer(nc, "RESTART", "workers")
        await replica.start()
        await nc.jetstream().publish("restart.before", b"before")
        assert [m.data for m in await replica.batch(256, WAIT)] == [b"before"]
        server.restart()  # the server forgets the requests it held for this replica
        await until(  # once the client is back and the stream recovered
            lambda: nc.jetstream().publish("restart.after", b"after", timeout=1),
            within=WAIT,
            what="the restarted server taking a publish",
            every=0.1,
            retry=(nats.errors.TimeoutError, nats.errors.NoRespondersError),
        )
        async with asyncio.timeout(WAIT):
            after = await replica.batch(256, WAIT)
        assert [m.data for m in after] == [b"after"]
        await replica.close()
    finally:
        await nc.close()
        server.stop()


async def test_a_deleted_consumer_is_an_error(nats_scope: NatsScope) -> None:
    stream = nats_scope.stream("WORK")
    await consumer_on(nats_scope.nc, stream, [nats_scope.subject("work", ">")])
    replica = PullConsumer(nats_scope.nc, stream, "workers")
    await replica.start()
    assert await replica.batch(256, 0.2) == []  # a request is outstanding
    await nats_scope.js.delete_consumer(stream, "workers")
    with pytest.raises(PullError, match="Consumer Deleted"):
        async with asyncio.timeout(WAIT):
            while True:
                await replica.batch(256, 1.0)
    await replica.close()


async def test_a_batch_lingers_for_the_messages_that_come_with_its_first(nats_scope: NatsScope) -> None:
    stream = nats_scope.stream("WORK")
    await consumer_on(nats_scope.nc, stream, [nats_scope.subject("work", ">")])
    replica = PullConsumer(nats_scope.nc, stream, "workers")
    await replica.start()
    await nats_scope.js.publish(nats_scope.subject("work", "0"), b"0")
    taking = asyncio.create_task(replica.batch(256, WAIT, linger=1.0))
    for i in (1, 2):  # they come while the batch lingers
        await nats_scope.js.publish(nats_scope.subject("work", str(i)), str(i).encode())
    assert [m.data for m in await taking] == [b"0", b"1", b"2"]
    assert await replica.close() == []


async def test_an_interrupted_read_returns_at_once(nats_scope: NatsScope) -> None:
    stream = nats_scope.stream("WORK")
    await consumer_on(nats_scope.nc, stream, [nats_scope.subject("work", ">")])
    replica = PullConsumer(nats_scope.nc, stream, "workers")
    await replica.start()
    reading = asyncio.create_task(replica.batch(256, 10 * WAIT))  # nothing will come
    await asyncio.sleep(0)
    replica.interrupt()  # the reader stops
    async with asyncio.timeout(WAIT):
        assert await reading == []
    assert await replica.close() == []
