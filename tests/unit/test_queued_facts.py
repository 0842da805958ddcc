"""A queued job is kept as what the rules read of it (its facts), and a job kept whole by an older replica
(its PodMigrationJob) reads the same."""

from __future__ import annotations

from datetime import UTC, datetime

from shared.api import codec
from shared.api.meta import ObjectMeta, ObjectReference
from shared.api.names import ANNOTATION_MIGRATION_PRIORITY
from shared.api.pmj import PodMigrationJob, PodMigrationJobSpec
from shared.rules.facts import facts_of, queued_facts, queued_record

CREATED = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


def job(**spec: object) -> PodMigrationJob:
    return PodMigrationJob(
        metadata=ObjectMeta(
            name="j1",
            uid="u1",
            creation_timestamp=CREATED,
            annotations={ANNOTATION_MIGRATION_PRIORITY: "7"},
        ),
        spec=PodMigrationJobSpec(pod_ref=ObjectReference(namespace="ns", name="web-0"), **spec),  # type: ignore[arg-type]
    )


def test_the_facts_of_a_job() -> None:
    facts = facts_of(job(mode="EvictDirectly"), "ReservationFirst")
    assert (facts.name, facts.uid, facts.pod_namespace, facts.pod_name) == ("j1", "u1", "ns", "web-0")
    assert (facts.mode, facts.created_at, facts.migration_priority) == (
        "EvictDirectly",
        CREATED.timestamp(),
        7,
    )
    assert (
        facts_of(job(), "ReservationFirst").mode == "ReservationFirst"
    )  # the default mode, when it names none


def test_a_queued_record_reads_back_and_so_does_a_whole_job_an_older_replica_kept() -> None:
    facts = facts_of(job(), "ReservationFirst")
    record = queued_record(facts)
    assert len(record) < len(codec.encode(job())) / 2
    assert queued_facts(record, "ReservationFirst") == facts
    assert queued_facts(codec.encode(job()), "ReservationFirst") == facts
    assert queued_facts(record.decode(), "ReservationFirst") == facts
