"""shared.nats.publisher.Publisher against a real JetStream: pipelined publishes stored in call order and
counted once acknowledged; a flush waits for what was published before it, not after; and every way an ack can
go wrong (JetStream's refusal, no stream, no ack at all) a PublishError at the flush that names it."""

from __future__ import annotations

import asyncio
import time

import pytest
from nats.aio.msg import Msg
from nats.js.api import DiscardPolicy, StreamConfig

from shared.nats import publisher as publisher_module
from shared.nats.publisher import Publisher, PublishError
from tests.conftest import NatsScope

pytestmark = [pytest.mark.integration]


async def test_pipelined_publishes_are_stored_in_call_order_and_a_repeat_is_acknowledged_not_stored(
    nats_scope: NatsScope,
) -> None:
    stream = nats_scope.stream("P")
    await nats_scope.js.add_stream(StreamConfig(name=stream, subjects=[nats_scope.subject("p", ">")]))
    publisher = Publisher(nats_scope.nc, window=64)  # a window smaller than the burst flushes midway
    for i in range(300):
        await publisher.publish(nats_scope.subject("p", str(i % 7)), str(i).encode(), f"m{i}")
    await publisher.flush()
    assert publisher.acked == 300
    for i in range(300):  # the same ids again: acknowledged as duplicates
        await publisher.publish(nats_scope.subject("p", str(i % 7)), str(i).encode(), f"m{i}")
    await publisher.flush()
    assert publisher.acked == 600
    info = await nats_scope.js.stream_info(stream)
    assert info.state.messages == 300
    sub = await nats_scope.js.pull_subscribe(nats_scope.subject("p", ">"), stream=stream)
    stored = [int(m.data) for m in await sub.fetch(300, timeout=5)]
    assert stored == list(range(300))
    assert await publisher.flush() == 0  # nothing outstanding
    await publisher.close()


async def test_a_publish_jetstream_refuses_fails_the_flush_with_its_reason_and_the_next_flush_is_clean(
    nats_scope: NatsScope,
) -> None:
    full = nats_scope.stream("FULL")
    await nats_scope.js.add_stream(
        StreamConfig(name=full, subjects=[nats_scope.subject("full")], max_msgs=2, discard=DiscardPolicy.NEW)
    )
    await nats_scope.js.add_stream(
        StreamConfig(name=nats_scope.stream("OK"), subjects=[nats_scope.subject("ok")])
    )
    publisher = Publisher(nats_scope.nc)
    for i in range(3):
        await publisher.publish(nats_scope.subject("full"), b"x", f"f{i}")
    await publisher.publish(nats_scope.subject("ok"), b"x", "ok0")
    with pytest.raises(PublishError, match="maximum messages exceeded"):
        await publisher.flush()
    assert publisher.acked == 3  # two in the full stream, one in the other
    await publisher.publish(nats_scope.subject("ok"), b"x", "ok1")
    assert await publisher.flush() == 1
    await publisher.close()


async def test_a_publish_no_stream_captures_fails_the_flush_once_its_retries_are_spent(
    nats_scope: NatsScope,
) -> None:
    publisher = Publisher(nats_scope.nc)
    await publisher.publish(nats_scope.subject("nowhere"), b"x", "n0")
    with pytest.raises(PublishError, match="no stream captures the subject"):
        await publisher.flush()
    await publisher.close()


async def test_a_publish_answered_no_responders_lands_once_its_stream_can_take_it(
    nats_scope: NatsScope, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a stream just made in a cluster, whose interest has not reached every server yet: the first send
    finds no responder; the one sent again is stored, once."""
    monkeypatch.setattr(publisher_module, "NO_RESPONDERS_WAIT", 2.0)  # room to make the stream meanwhile
    publisher = Publisher(nats_scope.nc)
    await publisher.publish(nats_scope.subject("late", "a"), b"x", "late1")
    stream = nats_scope.stream("LATE")
    await nats_scope.js.add_stream(StreamConfig(name=stream, subjects=[nats_scope.subject("late", ">")]))
    assert await publisher.flush() == 1
    assert publisher.acked == 1
    assert (await nats_scope.js.stream_info(stream)).state.messages == 1
    await publisher.close()


async def test_an_ack_that_never_comes_fails_the_flush_and_coming_late_is_ignored(
    nats_scope: NatsScope,
) -> None:
    # A plain subscriber, not a stream, takes the publish: nobody acknowledges it.
    taken: asyncio.Queue[str] = asyncio.Queue()

    async def hold(msg: Msg) -> None:
        await taken.put(msg.reply)

    sub = await nats_scope.nc.subscribe(nats_scope.subject("held"), cb=hold)
    publisher = Publisher(nats_scope.nc)
    await publisher.publish(nats_scope.subject("held"), b"x", "h0")
    with pytest.raises(PublishError, match="1 publishes were not acknowledged within 1s"):
        await publisher.flush(ack_wait=1.0)
    reply = await taken.get()
    # The ack arrives after the flush gave up, and a refusal at that: it belongs to no flush.
    await nats_scope.nc.publish(reply, b'{"error":{"code":503,"description":"late"}}')
    await nats_scope.nc.flush()
    await nats_scope.js.add_stream(
        StreamConfig(name=nats_scope.stream("L"), subjects=[nats_scope.subject("l")])
    )
    await publisher.publish(nats_scope.subject("l"), b"x", "l0")
    assert await publisher.flush() == 1
    assert publisher.acked == 1
    await sub.unsubscribe()
    await publisher.close()


async def test_a_lost_ack_is_given_up_on_from_its_publish_however_often_flushes_are_cut_short(
    nats_scope: NatsScope,
) -> None:
    """A caller with a deadline of its own (the tracker's reconcile) cancels its flush; the next flush must
    not wait a whole ack wait again for the same lost ack (the tracker stopped for good that way)."""
    sub = await nats_scope.nc.subscribe(nats_scope.subject("lost"))  # takes it, never acknowledges
    publisher = Publisher(nats_scope.nc)
    await publisher.publish(nats_scope.subject("lost"), b"x", "lost0")
    published = time.monotonic()
    for _ in range(2):  # cut short, twice, before the ack wait has passed since the publish
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.7):
                await publisher.flush(ack_wait=2.0)
    with pytest.raises(PublishError, match="1 publishes were not acknowledged"):
        await publisher.flush(ack_wait=2.0)
    # Given up on at the publish's ack wait: counted from each flush it would be 0.7 + 0.7 + 2.0 s.
    assert time.monotonic() - published < 3.0
    await sub.unsubscribe()
    await publisher.close()


async def test_a_flush_waits_for_what_was_published_before_it_not_after(nats_scope: NatsScope) -> None:
    await nats_scope.js.add_stream(
        StreamConfig(name=nats_scope.stream("B"), subjects=[nats_scope.subject("b")])
    )
    held = await nats_scope.nc.subscribe(nats_scope.subject("held"))  # takes publishes, acknowledges none
    publisher = Publisher(nats_scope.nc)
    await publisher.publish(nats_scope.subject("b"), b"x", "b0")
    flushing = asyncio.create_task(publisher.flush(ack_wait=30))
    await asyncio.sleep(0)  # the flush has begun: what comes now is the next flush's
    await publisher.publish(nats_scope.subject("held"), b"x", "h1")
    assert await flushing == 1  # not held up by the publish that never gets its ack
    with pytest.raises(PublishError, match="1 publishes were not acknowledged within 1s"):
        await publisher.flush(ack_wait=1.0)
    # Two callers sharing the publisher: each flush answers for what came since the last one began.
    await publisher.publish(nats_scope.subject("b"), b"x", "b1")
    first = asyncio.create_task(publisher.flush())
    await asyncio.sleep(0)
    await publisher.publish(nats_scope.subject("b"), b"x", "b2")
    await publisher.publish(nats_scope.subject("b"), b"x", "b3")
    assert (await publisher.flush(), await first) == (2, 1)
    assert publisher.acked == 4
    await held.unsubscribe()
    await publisher.close()


async def test_each_task_learns_of_its_own_failed_publish_whichever_flush_waited_for_it(
    nats_scope: NatsScope,
) -> None:
    """Jobs handled side by side share a publisher: a failure must reach the flush of the task that
    published it, not only whichever flush happened to wait for it (an eviction went ahead so once, its
    room-checked audit record lost to a leader election, its failure raised in another job's flush)."""
    await nats_scope.js.add_stream(
        StreamConfig(name=nats_scope.stream("G"), subjects=[nats_scope.subject("good")])
    )
    held = await nats_scope.nc.subscribe(nats_scope.subject("held"))  # takes publishes, acknowledges none
    publisher = Publisher(nats_scope.nc)
    published = asyncio.Event()
    outcomes: dict[str, str] = {}

    async def job(name: str, subject: str, *, after: asyncio.Event | None = None) -> None:
        if after is not None:
            await after.wait()
        await publisher.publish(nats_scope.subject(subject), b"x", name)
        if after is None:
            published.set()
            await other_flushed.wait()  # the other job's flush has waited for this publish, and ended
        try:
            await publisher.flush(ack_wait=1.0)
            outcomes[name] = "stored"
        except PublishError as exc:
            outcomes[name] = str(exc)
        if after is not None:
            other_flushed.set()

    for bad, why in (("nowhere", "no stream captures the subject"), ("held", "not acknowledged within 1s")):
        other_flushed, published = asyncio.Event(), asyncio.Event()
        await asyncio.gather(job(f"a-{bad}", bad), job(f"b-{bad}", "good", after=published))
        assert why in outcomes[f"a-{bad}"]  # before: "stored", its failure taken by the other job's flush
        assert outcomes[f"b-{bad}"] == "stored"  # its own publish was stored: the other's failure is not its
    await held.unsubscribe()
    await publisher.close()
