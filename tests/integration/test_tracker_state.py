"""What the tracker remembers of its own writes of a job, in a real Redis: every write that left the job
settled is known by its resourceVersion, so its PMJ event is not reconciled however late it comes (after
later writes of the same job, as when the event stream lags), and nothing else is taken for one."""

from __future__ import annotations

import pytest

from services.tracker.jobs.state import STALE, WRITES_REMEMBERED_S, JobState
from services.tracker.keys import TrackerKeys
from shared.ledger.scripts import as_text
from tests.conftest import RedisScope

pytestmark = [pytest.mark.integration]


async def test_every_settled_write_is_known_until_the_job_is_forgotten(redis_scope: RedisScope) -> None:
    keys = TrackerKeys(redis_scope.prefix)
    state = JobState(redis_scope.client, keys, "5m")
    for job, written in (("move-1", ["101"]), ("move-1", ["105", "106"]), ("move-2", ["104"])):
        await state.settled(job, written)  # a status; a later one and the reservationRef; another job's
    known = [await state.is_own_settled_write("move-1", rv) for rv in ("101", "104", "105", "106", "107")]
    assert known == [True, False, True, True, False]  # the first, though later ones came after it
    assert 0 < await redis_scope.client.ttl(keys.written("move-1")) <= WRITES_REMEMBERED_S
    await redis_scope.client.delete(keys.written("move-1"))  # as forgetting the deleted job does
    assert not await state.is_own_settled_write("move-1", "105")
    assert await state.is_own_settled_write("move-2", "104")


async def test_a_version_read_and_carried_out_is_known_as_decided(redis_scope: RedisScope) -> None:
    keys = TrackerKeys(redis_scope.prefix)
    state = JobState(redis_scope.client, keys, "5m")
    await state.settled("move-1", ["105"])
    pipe = redis_scope.client.pipeline(transaction=False)
    state.decided("move-1", "101", pipe)  # the job as created, admitted before its ADDED event came
    assert not await state.is_own_settled_write("move-1", "101")  # nothing is kept before the pipeline runs
    await pipe.execute()
    known = [await state.is_own_settled_write("move-1", rv) for rv in ("101", "105", "102")]
    assert known == [True, True, False]
    assert 0 < await redis_scope.client.ttl(keys.written("move-1")) <= WRITES_REMEMBERED_S


async def test_an_ending_is_marked_only_if_nothing_concerned_the_job_since_its_lock(
    redis_scope: RedisScope,
) -> None:
    keys = TrackerKeys(redis_scope.prefix)
    state = JobState(redis_scope.client, keys, "5m")

    async def end(name: str, version: str, read: str) -> str | None:
        pipe = redis_scope.client.pipeline(transaction=False)
        await state.ended(name, version, read=read, pipe=pipe)
        await pipe.execute()
        mark = await redis_scope.client.hget(keys.ended, name)
        return as_text(mark) if mark is not None else None

    assert await end("move-1", "107", read="") == "107"  # nothing was marked: its ending is
    # A Reservation event of the job while its ending is carried out: the ending is not marked, so the next
    # reconcile is a full one (kept room taken meanwhile is cleaned up by it), and marks it.
    pipe = redis_scope.client.pipeline(transaction=False)
    state.concerned("move-2", pipe)
    await pipe.execute()
    assert await end("move-2", "108", read="") == STALE
    assert await end("move-2", "108", read=STALE) == "108"


async def test_an_event_of_the_job_by_others_makes_its_ending_mark_stale(redis_scope: RedisScope) -> None:
    keys = TrackerKeys(redis_scope.prefix)
    state = JobState(redis_scope.client, keys, "5m")
    await state.settled("move-1", ["107"])
    await redis_scope.client.hset(keys.ended, "move-1", "107")
    assert not await state.job_changed("move-1", "107")  # its own settled write: nothing changed
    assert await redis_scope.client.hget(keys.ended, "move-1") == b"107"
    assert await state.job_changed("move-1", "109")  # edited by someone, or a new job by its name
    assert await redis_scope.client.hget(keys.ended, "move-1") == STALE.encode()
    assert await state.job_changed("move-2", "110")  # a job not ended is not marked
    assert await redis_scope.client.hget(keys.ended, "move-2") is None
