"""Writes a failover cannot silently lose: acted on only once replicas hold them.

Redis replicates asynchronously: a primary that fails after answering a write may not have passed it on,
and the replica promoted in its place never saw it. For a write a safety property rests on (an admission
holding a disruption slot, a claim on a replacement), losing it means breaching a budget or giving one
replacement to two jobs. So before acting on such writes a service sets a barrier key and sends `WAIT n`
on the same connection: replication is one ordered stream, so once `n` replicas acknowledge the barrier
they hold every write made before it, by any client. Fewer acknowledgements within the timeout: nothing is
acted on (`NotDurable`), and the work is tried again.

Split brain is fenced by the servers' `min-replicas-to-write` (deploy/ sets 1, with `min-replicas-max-lag`):
a primary cut off from its replicas refuses writes, so an old primary still reachable by some services
cannot take writes that the promoted one does not have; and a write it took just before it noticed is never
confirmed by the barrier, so never acted on.
"""

from __future__ import annotations

import time

import redis.asyncio as aioredis
import redis.exceptions
from prometheus_client import Histogram

BARRIER_SECONDS = Histogram(
    "podherd_redis_barrier_seconds",
    "Until the replicas acknowledged the writes a safety property rests on (WAIT)",
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 2.5),
)


class NotDurable(redis.exceptions.ConnectionError):
    """Too few replicas acknowledged in time: what was written must not be acted on (not yet)."""


class Durability:
    def __init__(self, client: aioredis.Redis, *, replicas: int, timeout: float, key: str) -> None:
        self.client, self.replicas, self.key = client, replicas, key
        self.timeout_ms = max(1, int(timeout * 1000))

    async def confirm(self) -> None:
        """Return once `replicas` replicas hold every write made before this call; else `NotDurable`."""
        if self.replicas == 0:
            return
        started = time.perf_counter()
        # As a context: a barrier failing mid-failover gives its connection back (and warns of nothing).
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.incr(self.key)
            pipe.execute_command("WAIT", self.replicas, self.timeout_ms)
            _, acknowledged = await pipe.execute()
        BARRIER_SECONDS.observe(time.perf_counter() - started)
        if int(acknowledged) < self.replicas:
            raise NotDurable(
                f"{acknowledged} of {self.replicas} Redis replicas acknowledged within {self.timeout_ms} ms:"
                " not acted on, tried again"
            )
