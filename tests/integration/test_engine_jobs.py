"""The arbitrator's engine taking in a batch of job events (real Redis and NATS): each job's last event in the
batch says what becomes of it, and the jobs that leave the queue leave in one step however many they are."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from services.arbitrator.engine import Engine
from services.arbitrator.fact_store import FactStore
from shared.api.meta import ObjectMeta, ObjectReference
from shared.api.pmj import Phase, PodMigrationJob, PodMigrationJobSpec, PodMigrationJobStatus
from shared.config.loader import config_from_dict
from shared.ledger.store import Ledger
from shared.nats import bus
from shared.nats.publisher import Publisher
from tests.conftest import NatsScope, RedisScope

pytestmark = [pytest.mark.integration]


def job(n: int, *, paused: bool = False, phase: Phase | None = None) -> PodMigrationJob:
    return PodMigrationJob(
        metadata=ObjectMeta(name=f"j{n}", uid=f"u{n}", creation_timestamp=datetime.now(UTC)),
        spec=PodMigrationJobSpec(pod_ref=ObjectReference(namespace="default", name=f"p{n}"), paused=paused),
        status=PodMigrationJobStatus(phase=phase) if phase else None,
    )


async def script_calls(scope: RedisScope) -> int:
    stats = await scope.client.info("commandstats")
    return sum(int(v["calls"]) for k, v in stats.items() if k in ("cmdstat_evalsha", "cmdstat_eval"))


async def test_a_jobs_last_event_in_a_batch_decides_and_leavers_go_in_one_step(
    redis_scope: RedisScope, nats_scope: NatsScope
) -> None:
    config = config_from_dict(
        {"redis": {"keyPrefix": redis_scope.prefix}, "nats": {"subjectPrefix": nats_scope.prefix}}
    )
    ledger = Ledger(redis_scope.client, redis_scope.prefix, 600)
    await ledger.completeness.rebuild([])
    subjects = bus.Subjects(nats_scope.prefix)
    engine = Engine(
        config,
        FactStore(redis_scope.client, redis_scope.prefix),
        ledger,
        publisher=Publisher(nats_scope.nc),
        subject=subjects.job,
        audit_subject=subjects.audit,
    )

    # Paused after it was created, and a job unpaused after it was paused: only the last state counts.
    await engine.on_jobs([(job(1), False, None), (job(1, paused=True), False, None)])
    await engine.on_jobs([(job(2, paused=True), False, None), (job(2), False, None)])
    assert set(await ledger.queue.head(10)) == {"u2"}

    for n in range(3, 13):
        await engine.on_jobs([(job(n), False, None)])
    assert len(await ledger.queue.head(20)) == 11
    # Ten jobs moving on (admitted elsewhere, each with two status writes) and one deleted: one script.
    before = await script_calls(redis_scope)
    moving = [(job(n, phase=phase), False, None) for n in range(3, 13) for phase in ("Running", "Running")]
    await engine.on_jobs([*moving, (job(2), True, None)])
    assert await script_calls(redis_scope) - before == 1
    assert await ledger.queue.head(20) == []
