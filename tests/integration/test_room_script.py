"""The tracker's room.lua against a real Redis: the room a workload's ended jobs did not use, kept and
swept."""

from __future__ import annotations

import pytest

from shared.ledger.scripts import as_text, lua_script
from tests.conftest import RedisScope

pytestmark = pytest.mark.integration


async def test_untaken_room_is_kept_while_a_sibling_is_in_flight_and_swept_by_the_last(
    redis_scope: RedisScope,
) -> None:
    client = redis_scope.client
    in_flight, kept = redis_scope.key("in-flight"), redis_scope.key("kept")
    ends = client.register_script(lua_script("room.lua", home="services.tracker.jobs"))

    async def end(job: str) -> list[object]:
        answer = await ends(keys=[in_flight, kept], args=[job])
        return [int(answer[0]), *sorted(as_text(v) for v in answer[1:])]

    await client.sadd(in_flight, "a", "b", "c")
    assert await end("a") == [0]  # b and c still in flight: a's untaken room stays
    assert await end("a") == [0]  # a redelivered ending changes nothing
    assert await end("never-evicted") == [2]  # nothing of its to keep
    assert await end("b") == [0]
    assert await end("c") == [1, "a", "b"]  # the last: its room goes, and the room a and b kept
    assert await client.exists(in_flight, kept) == 0
    assert await end("c") == [1]  # again: nothing left to sweep
