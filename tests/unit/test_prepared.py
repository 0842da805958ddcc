"""A service's setup on NATS (shared.nats.bus.prepared): tried again while JetStream cannot answer yet (a
cluster electing its leaders), ended cleanly when the service stops meanwhile, and failed at once on anything
else."""

from __future__ import annotations

import asyncio

import nats.errors
import pytest
from nats.js.errors import BadRequestError

from shared.nats import bus
from shared.nats.bus import StreamRefused


async def test_setup_is_tried_again_while_jetstream_cannot_answer() -> None:
    tries: list[int] = []

    async def setup() -> str:
        tries.append(1)
        if len(tries) < 3:
            raise nats.errors.TimeoutError if len(tries) == 1 else nats.errors.NoRespondersError
        return "ready"

    state = bus.SetUp("test")
    assert await state.check() == "test: JetStream not ready (not set up yet)"
    assert await bus.prepared(asyncio.Event(), setup, "test", delay=0.001, state=state) == "ready"
    assert len(tries) == 3
    assert await state.check() is None  # ready once its setup is done


async def test_a_service_not_set_up_says_why_it_is_not_ready() -> None:
    state, stop = bus.SetUp("watcher"), asyncio.Event()
    tries: list[int] = []

    async def setup() -> str:
        tries.append(1)
        if len(tries) == 2:
            stop.set()  # stopped while its second try waits for an answer
        raise nats.errors.NoRespondersError

    assert await bus.prepared(stop, setup, "watcher", delay=0.001, state=state) is None
    assert await state.check() == "watcher: JetStream not ready (NoRespondersError())"


async def test_a_service_stopped_while_its_setup_waits_ends_cleanly() -> None:
    stop = asyncio.Event()

    async def setup() -> str:
        stop.set()  # SIGTERM while the request waits for its answer
        raise nats.errors.TimeoutError

    assert await bus.prepared(stop, setup, "test") is None


async def test_a_setup_that_cannot_succeed_fails_at_once() -> None:
    async def setup() -> str:
        raise StreamRefused("the stream exists with another configuration")

    with pytest.raises(StreamRefused):
        await bus.prepared(asyncio.Event(), setup, "test", delay=0.001)


@pytest.mark.parametrize(
    ("description", "passes"),
    [
        ("no suitable peers for placement, peer offline", True),  # a server back, not yet seen as such
        ("no suitable peers for placement, insufficient storage", False),
        ("no suitable peers for placement, tags not matched ['ssd']", False),
    ],
)
def test_replicas_that_cannot_be_placed_wait_only_for_a_peer_offline(description: str, passes: bool) -> None:
    refused = BadRequestError(code=400, err_code=10005, description=description)
    assert bus.not_ready_yet(refused) is passes
