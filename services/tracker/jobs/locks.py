"""One replica at a time on a job: a lock per job in Redis, and a wait for it that is woken by its release.

A reconcile that finds the job's lock held says so in Redis (`lock-wanted`) and waits; the holder's release
sees that, in the same atomic step that frees the lock, and announces it on `p.tracker.unlocked` (and to
this replica's own waiters at once). A waiter registers before it tries, so a release between its try and
its wait still wakes it; a release announcement lost (core NATS) costs a waiter its `wait`, then the
message is handed back to be redelivered, as when the holder died (its lock expires after `ttl_ms`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import NamedTuple

import redis.asyncio as aioredis
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg

from services.tracker.keys import TrackerKeys
from shared.api import codec
from shared.api.codec import SchemaError
from shared.api.messages import JobUnlocked
from shared.ledger.scripts import as_text

# Taken: {1, the job's field of the peeked hash (KEYS[3]), '' when it has none}; held by another: {0}.
ACQUIRE = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if KEYS[3] == nil then return {1, ''} end
  return {1, redis.call('HGET', KEYS[3], ARGV[3]) or ''}
end
redis.call('SET', KEYS[2], '1', 'PX', ARGV[2])
return {0}
"""
RELEASE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return redis.call('DEL', KEYS[2])
"""


class Held(NamedTuple):
    """A job's lock, taken; with what the peeked hash held for the job at that moment ("": nothing)."""

    peeked: str


class JobLocks:
    def __init__(
        self,
        client: aioredis.Redis,
        keys: TrackerKeys,
        me: str,
        *,
        ttl_ms: int,
        announce: Callable[[str], Awaitable[None]],
        peek: str = "",
    ) -> None:
        """`peek`: a hash whose field for the job is read as its lock is taken, in the same step."""
        self.keys, self.me, self.ttl_ms, self.announce, self.peek = keys, me, ttl_ms, announce, peek
        self._acquire = client.register_script(ACQUIRE)
        self._release = client.register_script(RELEASE)
        self._waiters: dict[str, set[asyncio.Future[None]]] = {}

    async def acquire(self, job: str, wait: float) -> Held | None:
        """Take the job's lock, waiting up to `wait` seconds for its holder to release it (None: it did
        not)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        keys = [self.keys.lock(job), self.keys.lock_wanted(job), *([self.peek] if self.peek else [])]
        while True:
            released = loop.create_future()
            waiters = self._waiters.setdefault(job, set())
            waiters.add(released)
            try:
                taken = await self._acquire(keys=keys, args=[self.me, self.ttl_ms, job])
                if int(taken[0]):
                    return Held(as_text(taken[1]))
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return None
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(remaining):
                        await released
            finally:
                waiters.discard(released)
                if not waiters:
                    self._waiters.pop(job, None)

    async def release(self, job: str) -> None:
        if await self._release(keys=[self.keys.lock(job), self.keys.lock_wanted(job)], args=[self.me]):
            self.released(job)
            await self.announce(job)

    async def heard(self, msg: Msg) -> None:
        """A release announced on the bus (any replica's, this one's too; an older one's: the bare name)."""
        try:
            job = codec.decode(msg.data, JobUnlocked).job
        except SchemaError:
            job = msg.data.decode()
        self.released(job)

    def released(self, job: str) -> None:
        """The job's lock was released (here or by another replica): its waiters try again."""
        for waiter in self._waiters.get(job, ()):
            if not waiter.done():
                waiter.set_result(None)


def announcer(nc: NatsClient, subject: str) -> Callable[[str], Awaitable[None]]:
    """Announce a job's release on `subject` (core NATS: a lost one costs a waiter its wait)."""

    async def announce(job: str) -> None:
        await nc.publish(subject, codec.encode(JobUnlocked(job=job)))

    return announce
