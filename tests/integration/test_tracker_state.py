"""What the tracker remembers of its own writes of a job, in a real Redis: every write that left the job
settled is known by its resourceVersion, so its PMJ event is not reconciled however late it comes (after
later writes of the same job, as when the event stream lags), and nothing else is taken for one."""

from __future__ import annotations

import pytest

from services.tracker.jobs.state import WRITES_REMEMBERED_S, JobState
from services.tracker.keys import TrackerKeys
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
