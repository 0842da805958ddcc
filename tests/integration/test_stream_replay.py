"""What a consumer rebuilds from the events stream (the last event of every object) while NATS is away: the
read raises instead of ending early, so Redis's lost facts are never replaced by a part of them."""

from __future__ import annotations

import asyncio

import nats
import pytest
import redis.asyncio as aioredis

from podherd.harness.servers import Server
from shared.ledger.store import Ledger
from shared.nats import bus
from tests.integration.test_arbitrator import (
    admitted,
    arbitrator_config,
    arbitrators,
    decisions,
    setup_cluster,
)

pytestmark = pytest.mark.integration


async def test_a_stream_read_while_nats_is_away_raises_and_reads_whole_once_it_is_back(
    own_nats: Server,
) -> None:
    nc = await nats.connect(own_nats.url, reconnect_time_wait=0.1, max_reconnect_attempts=-1)
    js = nc.jetstream(timeout=1.0)
    subjects = bus.Subjects("replay")
    stream = subjects.events_stream
    await js.add_stream(name=stream, subjects=[subjects.all_events])
    for i in range(5):
        await js.publish(subjects.event("pods", "ns", f"p{i}"), b"old")
        await js.publish(subjects.event("pods", "ns", f"p{i}"), f"{i}".encode())

    async def read() -> list[bytes]:
        chunks = bus.last_per_subject(js, stream, subjects.events_of("pods"))
        return [m.data async for chunk in chunks for m in chunk]

    assert sorted(await read()) == [b"0", b"1", b"2", b"3", b"4"]
    assert [m async for m in bus.last_per_subject(js, "NO_SUCH_STREAM", "none.>")] == []  # absent: empty
    own_nats.kill()
    with pytest.raises(bus.StreamUnreadable, match=stream):
        await read()
    own_nats.restart()
    assert sorted(await read()) == [b"0", b"1", b"2", b"3", b"4"]
    await nc.close()


async def test_redis_flushed_while_nats_is_away_keeps_admission_closed_until_every_fact_is_replayed(
    own_nats: Server, redis_srv: Server, test_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The arbitrator rebuilds its ledger and facts from the events stream after Redis lost them; NATS away
    at that moment waits, one line per attempt, rather than marking a ledger complete that knows no pod."""
    config = arbitrator_config(own_nats, redis_srv, test_id)
    nc, subjects, cluster = await setup_cluster(config)
    await cluster.deployment("web", 10)
    for i in range(2):
        await cluster.pod(f"web-{i}", f"node-{i}", "web")
    await cluster.other_replicas()
    client = aioredis.from_url(config.redis.url)
    ledger = Ledger(client, test_id, 600)
    async with arbitrators([config]) as (arbitrator,):
        said, failed = asyncio.Event(), arbitrator.nats_down.failed

        def noted(reason: BaseException | str) -> float:  # its one line per attempt, heard as it is said
            said.set()
            return failed(reason)

        monkeypatch.setattr(arbitrator.nats_down, "failed", noted)
        await cluster.job("j0", "web-0", created=0)
        await decisions(nc, subjects, lambda ds: admitted(ds) == ["j0"])
        own_nats.kill()
        keys = [k async for k in client.scan_iter(match=f"*{test_id}*")]
        await client.delete(*keys)  # Redis loses everything while NATS is away: ledger, queue, facts
        async with asyncio.timeout(30):  # the rebuild meets NATS away, and says so
            await said.wait()
        assert not await ledger.completeness.is_complete()
        own_nats.restart()
        await cluster.job("j1", "web-1", created=1)  # its pod's facts are in Redis only if replayed
        later = await decisions(nc, subjects, lambda ds: "j1" in admitted(ds), within=30)
        assert "j1" in admitted(later)
        assert await ledger.completeness.is_complete()
    await client.aclose()
    await nc.close()
