"""Consumers of level-triggered work act once per key a fetch names; keys run side by side, each in order."""

from __future__ import annotations

import asyncio
from typing import Any

from nats.aio.msg import Msg

from shared.nats.consume import Retry, by_key, coalesced


def message(data: bytes) -> Msg:
    unconnected: Any = None  # only the handler reads these messages: nothing is acked here
    return Msg(unconnected, subject="p.work", data=data)


def test_each_key_is_acted_on_once_per_batch_and_failures_reach_the_messages_that_named_them() -> None:
    acted: list[str] = []
    bad_note = ValueError("undecodable")
    busy = Retry("job b is being handled by another replica", 0.2)

    async def note(msg: Msg) -> list[str]:
        if msg.data == b"garbage":
            raise bad_note
        return list(msg.data.decode())

    async def act(key: str) -> None:
        acted.append(key)
        if key == "b":
            raise busy

    handle = coalesced(note, act)
    batch = [message(data) for data in (b"a", b"ba", b"garbage", b"a", b"", b"c")]

    async def run() -> list[BaseException | None]:
        return await handle(batch)

    outcomes = asyncio.run(run())
    assert acted == ["a", "b", "c"]  # in first-named order, once each
    assert outcomes == [None, busy, bad_note, None, None, None]


def test_keys_are_acted_on_together_up_to_the_concurrency() -> None:
    b_started = asyncio.Event()
    finished: list[str] = []

    async def note(msg: Msg) -> list[str]:
        return [msg.data.decode()]

    async def act(key: str) -> None:
        if key == "a":  # finishes only once b has started: they must run at the same time
            async with asyncio.timeout(5):
                await b_started.wait()
        else:
            b_started.set()
        finished.append(key)

    async def run() -> list[BaseException | None]:
        return await coalesced(note, act, concurrency=2)([message(b"a"), message(b"b")])

    assert asyncio.run(run()) == [None, None]
    assert finished == ["b", "a"]


def test_by_key_keeps_one_keys_order_and_runs_different_keys_together() -> None:
    seen: list[str] = []
    other_started = asyncio.Event()
    refused = ValueError("no")

    async def handle(msg: Msg) -> None:
        data = msg.data.decode()
        if data == "a1":  # finishes only once b's message has started: keys run at the same time
            async with asyncio.timeout(5):
                await other_started.wait()
        if data == "b1":
            other_started.set()
        seen.append(data)
        if data == "a2":
            raise refused

    def key_of(msg: Msg) -> str:
        return msg.data.decode()[0]

    async def run() -> list[BaseException | None]:
        batch = [message(b"a1"), message(b"b1"), message(b"a2"), message(b"a3")]
        return await by_key(handle, key_of, concurrency=2)(batch)

    assert asyncio.run(run()) == [None, None, refused, None]
    assert seen == ["b1", "a1", "a2", "a3"]  # a's in their order, each after the one before


def test_notes_of_different_subjects_run_together_and_one_subjects_in_order() -> None:
    noted: list[str] = []
    other_started = asyncio.Event()

    async def note(msg: Msg) -> list[str]:
        data = msg.data.decode()
        if data == "pod-1":  # finishes only once the job's note has started: subjects run at the same time
            async with asyncio.timeout(5):
                await other_started.wait()
        if data == "job-1":
            other_started.set()
        noted.append(data)
        return [data.split("-")[0]]

    async def act(key: str) -> None:
        noted.append(f"act {key}")

    def on(subject: str, data: bytes) -> Msg:
        unconnected: Any = None
        return Msg(unconnected, subject=subject, data=data)

    batch = [on("p.pod.x", b"pod-1"), on("p.pod.x", b"pod-2"), on("p.job.y", b"job-1")]

    async def run() -> list[BaseException | None]:
        return await coalesced(note, act, concurrency=4)(batch)

    assert asyncio.run(run()) == [None, None, None]
    # every note before any act; acts in first-named order
    assert noted == ["job-1", "pod-1", "pod-2", "act pod", "act job"]


def test_batches_handled_at_once_keep_one_keys_order_and_hold_up_no_other_key() -> None:
    seen: list[str] = []
    other_done = asyncio.Event()

    async def handle(msg: Msg) -> None:
        data = msg.data.decode()
        if data == "a1":  # the first batch's message finishes only once the other key's has
            async with asyncio.timeout(5):
                await other_done.wait()
        seen.append(data)
        if data == "b1":
            other_done.set()

    async def run() -> list[list[BaseException | None]]:
        handle_batch = by_key(handle, lambda m: m.data.decode()[0], concurrency=4)
        first = asyncio.ensure_future(handle_batch([message(b"a1")]))
        second = asyncio.ensure_future(handle_batch([message(b"a2"), message(b"b1")]))
        return [await first, await second]

    assert asyncio.run(run()) == [[None], [None, None]]
    assert seen == ["b1", "a1", "a2"]  # a2 behind a1 though it came in a batch of its own


def test_notes_of_one_subject_keep_their_order_across_batches_and_a_key_named_again_acts_again() -> None:
    noted: list[str] = []
    first_noted = asyncio.Event()
    release = asyncio.Event()
    second_noted = asyncio.Event()

    async def note(msg: Msg) -> list[str]:
        data = msg.data.decode()
        noted.append(data)
        if data == "event-2":
            second_noted.set()
        return ["job"]

    async def act(key: str) -> None:
        noted.append(f"act {key}")
        first_noted.set()
        if not release.is_set():  # the first run holds until the second batch has asked
            async with asyncio.timeout(5):
                await release.wait()

    async def run() -> None:
        handle_batch = coalesced(note, act, concurrency=4)
        first = asyncio.ensure_future(handle_batch([message(b"event-1")]))
        async with asyncio.timeout(5):
            await first_noted.wait()
        second = asyncio.ensure_future(handle_batch([message(b"event-2")]))
        async with asyncio.timeout(5):
            await second_noted.wait()
        assert noted == ["event-1", "act job", "event-2"]  # noted while the first run still runs
        release.set()
        assert await first == [None]
        assert await second == [None]

    asyncio.run(run())
    assert noted == ["event-1", "act job", "event-2", "act job"]  # one more run: it sees event-2
