"""When the services are past a server fault: the consumers that carry a job's end to its Reservation's
deletion (the tracker's two, the executor's) have taken in what queued up while NATS or Redis was out.

A cleanup cannot be made while the stream that carries it has no leader or Redis has no primary, nor before
the messages that queued up meanwhile are handled: the chaos run counts a Reservation's grace from then.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import nats
import nats.errors
from nats.js import JetStreamContext
from nats.js.api import ConsumerInfo

from services.executor.service import CONSUMER as EXECUTOR_CONSUMER
from services.tracker.service import EVENTS_CONSUMER, JOBS_CONSUMER
from shared.config.model import nats_servers
from shared.nats import bus

# (stream, consumer, handled): `handled`, every message up to the mark acknowledged; else handed out, for the
# executor, whose consumer also holds evictions a budget blocks (retried until their job ends), while a
# cleanup is acted on as soon as it is taken.
PIPELINE = (
    ("events", EVENTS_CONSUMER, True),
    ("jobs", JOBS_CONSUMER, True),
    ("jobs", EXECUTOR_CONSUMER, False),
)
POLL_S = 0.5


def past(info: ConsumerInfo, mark: int, *, handled: bool) -> bool:
    """Whether a consumer is past stream sequence `mark`: everything its filter takes up to there was
    acknowledged (`handled`) or handed out; or nothing it takes is left at all."""
    done = info.ack_floor if handled else info.delivered
    if done is not None and (done.stream_seq or 0) >= mark:
        return True
    return not info.num_pending and (not handled or not info.num_ack_pending)


async def until_caught_up(nats_url: str, prefix: str, **options: Any) -> float:
    """Wait until every consumer of the pipeline is past what its stream held when this was called (its
    state read again while NATS elects or reconnects); the seconds it took."""
    started = time.monotonic()
    subjects = bus.Subjects(prefix)
    streams = {"events": subjects.events_stream, "jobs": subjects.jobs_stream}
    marks: dict[str, int] = {}
    nc = await nats.connect(nats_servers(nats_url), max_reconnect_attempts=-1, **options)  # options: TLS
    try:
        while True:
            with contextlib.suppress(nats.errors.Error, TimeoutError):
                if await _caught_up(nc.jetstream(), streams, marks):
                    return time.monotonic() - started
            await asyncio.sleep(POLL_S)  # no event says when a consumer moved on: its state is read again
    finally:
        await nc.close()


async def _caught_up(js: JetStreamContext, streams: dict[str, str], marks: dict[str, int]) -> bool:
    for kind, stream in streams.items():
        if kind not in marks:  # read once, at the first answer after the fault
            marks[kind] = (await js.stream_info(stream)).state.last_seq
    for kind, consumer, handled in PIPELINE:
        if not past(await js.consumer_info(streams[kind], consumer), marks[kind], handled=handled):
            return False
    return True
