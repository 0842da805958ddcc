"""The executors' room checks, read back from the audit stream to hold every eviction against them: read whole
even when the stream's cluster is electing while it is read, never cut short to a part."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import nats
import pytest

from podherd.harness.nats_cluster import NatsCluster
from podherd.watchdog.history import RoomCheck, room_checks
from shared.api.messages import AuditRecord
from shared.config.loader import config_from_dict
from shared.nats import bus
from shared.nats.publisher import Publisher

pytestmark = pytest.mark.integration


def checked(job: str, version: int) -> AuditRecord:
    return AuditRecord(
        id=f"{job}/room-checked/{job}/{version}",
        time=datetime.now(UTC),
        action="room-checked",
        actor="executor/e0",
        job=job,
        details={"reservation": job, "resourceVersion": str(version), "node": "node-1"},
    )


async def test_room_checks_are_read_whole_once_a_stream_without_quorum_has_it_again(
    nats_cluster: NatsCluster, test_id: str
) -> None:
    config = config_from_dict({"nats": {"url": nats_cluster.url, "subjectPrefix": test_id, "replicas": 3}})
    subjects = bus.Subjects(test_id)
    nc = await nats.connect(nats_cluster.servers[0].url)
    try:
        await bus.ensure_work_streams(nc.jetstream(), subjects, config.nats)
        publisher = Publisher(nc)
        for i in range(50):
            await publisher.publish_audit(subjects.audit(f"j{i}"), checked(f"j{i}", 100 + i))
        await publisher.flush()
    finally:
        await nc.close()
    first, *others = nats_cluster.servers
    for server in others:  # no quorum: the stream cannot answer
        server.kill()
    reading = asyncio.create_task(room_checks(first.url, test_id, within=120))
    _, pending = await asyncio.wait({reading}, timeout=3)
    assert pending, "read while the stream had no leader"  # neither an error nor an empty answer
    for server in others:
        await asyncio.to_thread(nats_cluster.restart, server)
    async with asyncio.timeout(120):
        checks = await reading
    expected = [
        RoomCheck(job=f"j{i}", reservation=f"j{i}", resource_version=100 + i, node="node-1")
        for i in range(50)
    ]
    assert sorted(checks, key=lambda c: c.resource_version) == expected
