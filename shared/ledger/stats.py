"""The migration statistics one service writes and another reads, owned here so that the contract is an
import: the tracker counts, when a job ends, its pod's failures and its workload's migrations; the
arbitrator reads them for its ordering rules (pods that failed to migrate go last, workloads migrated
least go first). Hashes `<keyPrefix>:stats:pod-failures` (namespace/name -> count) and
`<keyPrefix>:stats:workload-migrations` (workload key -> count)."""

from __future__ import annotations

from collections.abc import Sequence

import redis.asyncio as aioredis
from redis.asyncio.client import Pipeline


class MigrationStats:
    def __init__(self, client: aioredis.Redis, key_prefix: str) -> None:
        self.client = client
        self.pod_failures = f"{key_prefix}:stats:pod-failures"
        self.workload_migrations = f"{key_prefix}:stats:workload-migrations"

    async def pod_failed(self, namespace: str, name: str) -> None:
        await self.client.hincrby(self.pod_failures, f"{namespace}/{name}", 1)

    async def workload_migrated(self, workload: str) -> None:
        await self.client.hincrby(self.workload_migrations, workload, 1)

    def queue_pod_failures(self, pipe: Pipeline, pods: Sequence[str]) -> None:
        """Queue the read of `pods`' failure counts (namespace/name) on a pipeline: one reply, a list."""
        pipe.hmget(self.pod_failures, list(pods))

    def queue_workload_migrations(self, pipe: Pipeline, workloads: Sequence[str]) -> None:
        pipe.hmget(self.workload_migrations, list(workloads))


def counts(raw: Sequence[bytes | str | None]) -> list[int]:
    """A queued read's reply as counts (absent: 0)."""
    return [int(r or 0) for r in raw]
