"""One tracker replica at a time on a job, with real Redis and NATS: a reconcile that finds the job locked
waits for the holder's release, woken by it (another replica's through `p.tracker.unlocked`, its own
replica's at once) instead of being handed back to come again later; a lock that is not released (its
holder died) sends the waiter back once its wait is up."""

from __future__ import annotations

import asyncio

import pytest
from nats.aio.msg import Msg

from services.tracker.jobs.locks import Held, JobLocks, announcer
from services.tracker.keys import TrackerKeys
from shared.api import codec
from shared.api.messages import JobUnlocked
from shared.nats.bus import Subjects
from tests.conftest import NatsScope, RedisScope
from tests.polling import until

pytestmark = [pytest.mark.integration]
LONG = 60.0  # a waiter not woken by the release would wait this long and then fail


def unlocked(msg: Msg) -> str:
    return codec.decode(msg.data, JobUnlocked).job


def replica(scope: RedisScope, nats: NatsScope, me: str) -> JobLocks:
    announce = announcer(nats.nc, Subjects(nats.prefix).job_unlocked)
    return JobLocks(scope.client, TrackerKeys(scope.prefix), me, ttl_ms=15_000, announce=announce)


async def test_a_waiter_on_another_replica_takes_the_lock_when_it_is_released(
    redis_scope: RedisScope, nats_scope: NatsScope
) -> None:
    a, b = replica(redis_scope, nats_scope, "a"), replica(redis_scope, nats_scope, "b")
    heard = await nats_scope.nc.subscribe(Subjects(nats_scope.prefix).job_unlocked, cb=b.heard)
    announced = await nats_scope.nc.subscribe(Subjects(nats_scope.prefix).job_unlocked)
    assert await a.acquire("move-1", 0)
    assert not await b.acquire("move-1", 0)  # held: b now wants it
    waiting = asyncio.create_task(b.acquire("move-1", LONG))
    assert await a.acquire("move-2", 0)  # other jobs are not held up
    await a.release("move-1")
    assert unlocked(await announced.next_msg(timeout=LONG)) == "move-1"
    assert await waiting
    assert not await a.acquire("move-1", 0)  # b holds it now
    await b.release("move-1")
    assert await a.acquire("move-1", 0)
    await heard.unsubscribe()
    await announced.unsubscribe()


async def test_a_release_announced_by_an_older_replica_as_a_bare_name_wakes_the_waiter_too(
    redis_scope: RedisScope, nats_scope: NatsScope
) -> None:
    a, b = replica(redis_scope, nats_scope, "a"), replica(redis_scope, nats_scope, "b")
    subject = Subjects(nats_scope.prefix).job_unlocked
    heard = await nats_scope.nc.subscribe(subject, cb=b.heard)
    assert await a.acquire("move-1", 0)
    waiting = asyncio.create_task(b.acquire("move-1", LONG))
    keys = TrackerKeys(redis_scope.prefix)
    # b found it held and waits (no event says so: its mark is polled).
    await until(
        lambda: redis_scope.client.exists(keys.lock_wanted("move-1")), within=10, what="b's mark", every=0.01
    )
    await redis_scope.client.delete(keys.lock("move-1"))
    await nats_scope.nc.publish(subject, b"move-1")  # what a tracker before versioned messages sends
    assert await waiting
    await heard.unsubscribe()


async def test_a_release_nobody_waits_for_is_not_announced(
    redis_scope: RedisScope, nats_scope: NatsScope
) -> None:
    a = replica(redis_scope, nats_scope, "a")
    announced = await nats_scope.nc.subscribe(Subjects(nats_scope.prefix).job_unlocked)
    for job in ("move-1", "move-2"):
        assert await a.acquire(job, 0)
    assert not await a.acquire("move-2", 0)  # wanted (by this replica itself)
    await a.release("move-1")
    await a.release("move-2")
    assert unlocked(await announced.next_msg(timeout=LONG)) == "move-2"  # only the one that was wanted
    with pytest.raises(TimeoutError):
        await announced.next_msg(timeout=0.2)
    await announced.unsubscribe()


async def test_reconciles_of_one_replica_wait_for_each_other_without_the_bus(redis_scope: RedisScope) -> None:
    said: list[str] = []

    async def announce(job: str) -> None:
        said.append(job)  # nobody hears it: the replica's own waiter must be woken directly

    locks = JobLocks(
        redis_scope.client, TrackerKeys(redis_scope.prefix), "a", ttl_ms=15_000, announce=announce
    )
    assert await locks.acquire("move-1", 0)
    order: list[str] = []

    async def second() -> None:
        assert await locks.acquire("move-1", LONG)
        order.append("second holds it")

    waiting = asyncio.create_task(second())
    wanted = TrackerKeys(redis_scope.prefix).lock_wanted("move-1")
    # Until the second reconcile has tried (Redis offers no event for a key being written).
    await until(lambda: redis_scope.client.exists(wanted), within=10, what="the second's mark", every=0.005)
    order.append("first releases")
    await locks.release("move-1")
    await waiting
    assert order == ["first releases", "second holds it"]
    assert said == ["move-1"]


async def test_a_lock_never_released_sends_the_waiter_back_and_only_its_holder_frees_it(
    redis_scope: RedisScope, nats_scope: NatsScope
) -> None:
    a, b = replica(redis_scope, nats_scope, "a"), replica(redis_scope, nats_scope, "b")
    assert await a.acquire("move-1", 0)  # and a dies holding it
    assert not await b.acquire("move-1", 0.1)
    await b.release("move-1")  # not b's to release
    assert not await b.acquire("move-1", 0)
    ttl = await redis_scope.client.pttl(TrackerKeys(redis_scope.prefix).lock("move-1"))
    assert 0 < ttl <= 15_000  # it expires on its own


async def test_the_lock_reads_the_jobs_field_of_the_peeked_hash_as_it_is_taken(
    redis_scope: RedisScope, nats_scope: NatsScope
) -> None:
    keys = TrackerKeys(redis_scope.prefix)
    announce = announcer(nats_scope.nc, Subjects(nats_scope.prefix).job_unlocked)
    locks = JobLocks(redis_scope.client, keys, "a", ttl_ms=15_000, announce=announce, peek=keys.ended)
    await redis_scope.client.hset(keys.ended, "move-1", "107")
    assert await locks.acquire("move-1", 0) == Held("107")
    assert await locks.acquire("move-2", 0) == Held("")  # nothing there for it
    assert await locks.acquire("move-1", 0) is None  # held: not taken, nothing read
    plain = replica(redis_scope, nats_scope, "b")  # peeks at nothing
    await locks.release("move-1")
    assert await plain.acquire("move-1", 0) == Held("")
