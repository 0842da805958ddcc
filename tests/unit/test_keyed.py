"""Work keyed by what it is about (shared.nats.keyed): one key's work in the order its turns were taken, and
level-triggered work run at most once at a time per key, shared by whoever asks before it starts."""

from __future__ import annotations

import asyncio
from contextlib import AbstractAsyncContextManager

import pytest

from shared.nats.keyed import Coalescing, InOrder


def test_turns_run_in_the_order_they_were_taken_one_key_at_a_time() -> None:
    ran: list[str] = []

    async def main() -> None:
        line = InOrder()
        first, second, other = line.turn("a"), line.turn("a"), line.turn("b")

        async def work(turn: AbstractAsyncContextManager[None], name: str) -> None:
            async with turn:
                ran.append(f"{name} in")
                await asyncio.sleep(0)
                ran.append(f"{name} out")

        # Entered in reverse order: the second of "a" still waits for the first; "b" waits for no one.
        await asyncio.gather(work(second, "a2"), work(other, "b1"), work(first, "a1"))

    asyncio.run(main())
    assert ran.index("a1 out") < ran.index("a2 in")
    assert ran.index("b1 in") < ran.index("a1 out")  # another key went side by side


def test_a_turn_given_up_while_waiting_or_never_entered_holds_no_one_up() -> None:
    async def main() -> list[str]:
        line = InOrder()
        ran: list[str] = []
        blocker, cancelled, abandoned, last = (line.turn("a") for _ in range(4))

        async def enter(turn: AbstractAsyncContextManager[None], name: str) -> None:
            async with turn:
                ran.append(name)

        async with blocker:
            waiting = asyncio.create_task(enter(cancelled, "cancelled"))
            await asyncio.sleep(0)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
        abandoned.abandon()  # its batch was cancelled before it could enter
        async with asyncio.timeout(5):
            await enter(last, "last")
        return ran

    assert asyncio.run(main()) == ["last"]


def test_asks_before_a_run_starts_share_it_and_an_ask_during_a_run_gets_one_more() -> None:
    async def main() -> tuple[list[str], list[Exception | None]]:
        acted: list[str] = []
        release = asyncio.Event()

        async def act(key: str) -> None:
            acted.append(key)
            if len(acted) == 1:
                async with asyncio.timeout(5):
                    await release.wait()

        runs = Coalescing(act, concurrency=4)
        first = asyncio.create_task(runs.ask("job"))  # runs at once, and holds
        await asyncio.sleep(0)
        during = [asyncio.create_task(runs.ask("job")) for _ in range(3)]  # one more run, shared by all three
        await asyncio.sleep(0)
        assert acted == ["job"]  # never two runs of one key at once
        release.set()
        outcomes = [await first, *[await task for task in during]]
        return acted, outcomes

    acted, outcomes = asyncio.run(main())
    assert acted == ["job", "job"]
    assert outcomes == [None, None, None, None]


def test_a_failed_run_is_the_outcome_of_every_ask_it_served_and_an_exit_is_raised() -> None:
    refused = ValueError("conflict")

    class Exit(BaseException):
        pass

    async def main() -> tuple[Exception | None, Exception | None]:
        async def act(key: str) -> None:
            await asyncio.sleep(0)
            if key == "bad":
                raise refused
            raise Exit

        runs = Coalescing(act, concurrency=1)
        shared = await asyncio.gather(runs.ask("bad"), runs.ask("bad"))
        with pytest.raises(Exit):
            await runs.ask("exit")
        return shared[0], shared[1]

    assert asyncio.run(main()) == (refused, refused)


def test_different_keys_run_side_by_side_up_to_the_concurrency() -> None:
    async def main() -> int:
        running, most = 0, 0
        full = asyncio.Event()  # as many running as the concurrency allows: each holds until then

        async def act(key: str) -> None:
            nonlocal running, most
            running += 1
            most = max(most, running)
            if running == 3:
                full.set()
            async with asyncio.timeout(5):
                await full.wait()
            running -= 1

        runs = Coalescing(act, concurrency=3)
        await asyncio.gather(*(runs.ask(f"job-{i}") for i in range(10)))
        return most

    assert asyncio.run(main()) == 3
