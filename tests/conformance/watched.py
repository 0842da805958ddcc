"""The pipeline with the watchdog beside it: whatever a conformance test does, on either engine, no limit is
exceeded and no pod is evicted without its room."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from podherd.watchdog.invariants import Watchdog
from shared.config.model import PodherdConfig
from shared.kube.client import KubeClient
from shared.redis import client as redis_client
from tests.e2e.pipeline import Pipeline, pipeline


@contextlib.asynccontextmanager
async def watched(config: PodherdConfig) -> AsyncIterator[Pipeline]:
    redis = redis_client.connect(config.redis)
    kube = KubeClient.from_config(config.kubernetes)
    watchdog = Watchdog(kube, redis, config.redis.key_prefix, args=config.migration_controller)
    stop = asyncio.Event()
    watching = asyncio.create_task(watchdog.run(stop))
    try:
        async with pipeline(config) as running:
            yield running
        stop.set()
        findings = await watching
    finally:
        stop.set()
        if not watching.done():
            watching.cancel()
        await redis.aclose()
        await kube.aclose()
    breaches = (findings.slot_breaches, findings.workload_breaches, findings.pdb_breaches)
    assert findings.limits_exceeded == 0, (*breaches, findings.surge_breaches)
    assert findings.evictions_without_room == []
