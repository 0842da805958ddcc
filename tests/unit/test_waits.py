"""Timed waits never swallow a cancellation (Python 3.11's `asyncio.wait_for` does)."""

from __future__ import annotations

import asyncio

import pytest

from kubesim.apiserver import kinds
from kubesim.apiserver.store import Store
from kubesim.controllers.base import Controller
from kubesim.options import SimOptions
from shared.core.waits import cancel_and_wait, wait_event, when_set


async def _waits_forever(event: asyncio.Event) -> None:
    while True:
        await wait_event(event, 10)
        event.clear()


async def test_a_cancellation_that_meets_the_event_ends_the_waiting_loop() -> None:
    event = asyncio.Event()
    task = asyncio.create_task(_waits_forever(event))
    await asyncio.sleep(0)  # the loop is waiting on the event
    event.set()  # the wait completes...
    task.cancel()  # ...and the cancellation arrives in the same iteration
    done, _ = await asyncio.wait([task], timeout=5)
    assert done and task.cancelled()


async def test_wait_event_says_whether_the_event_was_set() -> None:
    event = asyncio.Event()
    assert await wait_event(event, 0.01) is False
    event.set()
    assert await wait_event(event, 0) is True


async def test_cancelling_the_caller_of_cancel_and_wait_cancels_it() -> None:
    cleaning = asyncio.Event()

    async def slow_to_stop() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            cleaning.set()
            await asyncio.sleep(0.05)  # cleanup that takes a while

    worker = asyncio.create_task(slow_to_stop())
    await asyncio.sleep(0)
    caller = asyncio.create_task(cancel_and_wait(worker))
    await cleaning.wait()
    caller.cancel()
    done, _ = await asyncio.wait([caller], timeout=5)
    assert done and caller.cancelled()


class Ticking(Controller[str]):
    tick = 10.0


@pytest.mark.parametrize("settle", [None, 0, 1, 2, 3])
async def test_a_controller_stops_even_when_woken_as_it_is_stopped(settle: int | None) -> None:
    """`settle`: loop iterations between a wake-up and the stop (None: not woken), so one of them lands
    the cancellation between the wait completing and the loop resuming."""
    controller = Ticking(Store(kinds.registry()), SimOptions())
    controller.start()
    for _ in range(3):
        await asyncio.sleep(0)  # the loop is waiting for a wake-up
    if settle is not None:
        controller.mark("key")
        for _ in range(settle):
            await asyncio.sleep(0)
    stopping = asyncio.create_task(controller.stop())
    done, _ = await asyncio.wait([stopping], timeout=5)
    assert done, "the controller's loop went on after it was cancelled"


def test_when_set_calls_back_once_the_event_is_set_and_not_once_cancelled() -> None:
    async def main() -> list[str]:
        called: list[str] = []
        stop, other = asyncio.Event(), asyncio.Event()
        watching = when_set(stop, lambda: called.append("stop"))
        forgotten = when_set(other, lambda: called.append("other"))
        forgotten.cancel()
        stop.set()
        other.set()
        await asyncio.wait([watching, forgotten])
        await asyncio.sleep(0)  # done callbacks run on the loop's next turn
        return called

    assert asyncio.run(main()) == ["stop"]


async def _renewing(answers: asyncio.Queue[asyncio.Future[str]], renewed: list[str]) -> None:
    """A lease-renewing loop whose request, as nats-py's, waits for its answer through `asyncio.wait_for`."""
    while True:
        answer: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        await answers.put(answer)
        renewed.append(await asyncio.wait_for(answer, 5))  # noqa: TID251 (as the library waits, on purpose)


async def test_cancel_and_wait_ends_a_task_whose_library_swallowed_the_cancellation() -> None:
    answers: asyncio.Queue[asyncio.Future[str]] = asyncio.Queue()
    renewed: list[str] = []
    renewer = asyncio.create_task(_renewing(answers, renewed))
    answer = await answers.get()
    await asyncio.sleep(0)  # the renewer waits for the answer
    answer.set_result("renewed")  # the answer arrives...
    stopping = asyncio.create_task(cancel_and_wait(renewer))  # ...and the cancellation in the same iteration
    # The loop went on (Python 3.11's wait_for returned the answer instead): it asks again, and its next
    # wait is where the repeated cancellation lands.
    async with asyncio.timeout(5):
        await answers.get()
    done, _ = await asyncio.wait([stopping], timeout=5)
    assert done and renewer.cancelled()
    assert renewed == ["renewed"]
