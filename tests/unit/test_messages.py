"""Every NATS message: versioned, strict, and specific about what is wrong."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from shared.api import codec
from shared.api.codec import SchemaError
from shared.api.messages import (
    SCHEMA_VERSION,
    AuditRecord,
    DeadLetter,
    Decision,
    IntentReply,
    JobRef,
    MigrationIntent,
    ObjectEvent,
    PodInfo,
    WorkloadRef,
)
from shared.api.pmj import PodMigrationJob

NOW = datetime(2026, 11, 22, 10, 0, 0, tzinfo=UTC)

INTENT = {
    "schemaVersion": 1,
    "idempotencyKey": "defrag-2026-11-22-0001",
    "pod": {"namespace": "default", "name": "web-0"},
    "requester": "defragmenter",
    "targetNode": "node-2",
    "mode": "ReservationFirst",
    "ttl": "10m",
    "priority": 5,
    "reason": "free node-1 for a 4-core pod",
}


def test_intent_decodes() -> None:
    intent = codec.decode(json.dumps(INTENT), MigrationIntent)
    assert intent.pod.name == "web-0"
    assert intent.target_node == "node-2"
    assert intent.schema_version == SCHEMA_VERSION


def test_intent_minimal_defaults() -> None:
    intent = codec.convert(
        {"idempotencyKey": "k", "pod": {"namespace": "ns", "name": "p"}, "requester": "me"}, MigrationIntent
    )
    assert intent.mode is None and intent.ttl is None and intent.priority == 0 and not intent.paused


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"idempotencyKey": None}, "idempotencyKey"),
        ({"idempotencyKey": ""}, "idempotencyKey"),
        ({"pod": {"namespace": "default"}}, "pod.name"),
        ({"pod": {"namespace": "Default", "name": "web-0"}}, "pod.namespace"),
        ({"pod": {"namespace": "default", "name": "web_0"}}, "pod.name"),
        ({"mode": "Teleport"}, "mode"),
        ({"ttl": "ten minutes"}, "ttl"),
        ({"priority": "high"}, "priority"),
        ({"targetnode": "node-2"}, "targetnode"),  # a typo is an error, not an ignored option
        ({"pod": {"namespace": "d", "name": "p", "node": "n"}}, "pod.node"),
        ({"requester": ""}, "requester"),
    ],
)
def test_intent_errors_name_the_field(change: dict[str, object], field: str) -> None:
    document = {**INTENT, **change}
    document = {k: v for k, v in document.items() if v is not None}
    with pytest.raises(SchemaError) as err:
        codec.decode(json.dumps(document), MigrationIntent)
    assert err.value.field == field


def test_missing_required_field_is_named() -> None:
    document = {k: v for k, v in INTENT.items() if k != "requester"}
    with pytest.raises(SchemaError) as err:
        codec.decode(json.dumps(document), MigrationIntent)
    assert err.value.field == "requester"
    assert "missing required field" in err.value.reason


def test_newer_schema_version_is_rejected() -> None:
    with pytest.raises(SchemaError, match="unsupported schemaVersion 2"):
        codec.decode(json.dumps({**INTENT, "schemaVersion": 2}), MigrationIntent)


def test_schema_version_is_always_written() -> None:
    reply = IntentReply(ok=True, job="migrate-web-0", created=True)
    assert json.loads(codec.encode(reply))["schemaVersion"] == SCHEMA_VERSION


def test_pod_event_roundtrip() -> None:
    event = ObjectEvent[PodInfo](
        kind="Pod",
        type="MODIFIED",
        name="web-0",
        uid="u-1",
        namespace="default",
        resource_version="77",
        observed_at=NOW,
        object=PodInfo(
            uid="u-1",
            namespace="default",
            name="web-0",
            node_name="node-1",
            phase="Running",
            ready=True,
            workload=WorkloadRef(kind="Deployment", namespace="default", name="web"),
            requests={"cpu": "500m"},
            volume_kinds=["emptyDir"],
        ),
    )
    data = codec.encode(event)
    back = codec.decode(data, ObjectEvent[PodInfo])
    assert back == event
    with pytest.raises(SchemaError) as err:
        codec.decode(data.replace(b'"MODIFIED"', b'"TOUCHED"'), ObjectEvent[PodInfo])
    assert err.value.field == "type"


def test_job_event_carries_the_whole_pmj() -> None:
    job = codec.convert({"metadata": {"name": "j"}, "spec": {"mode": "EvictDirectly"}}, PodMigrationJob)
    event = ObjectEvent[PodMigrationJob](
        kind="PodMigrationJob",
        type="ADDED",
        name="j",
        uid="u",
        resource_version="1",
        observed_at=NOW,
        object=job,
    )
    assert codec.decode(codec.encode(event), ObjectEvent[PodMigrationJob]).object.spec.mode == "EvictDirectly"


def test_decision_and_audit_roundtrip() -> None:
    decision = Decision(
        job=JobRef(name="j", uid="u"),
        decision="deferred",
        rule="maxMigratingPerNode",
        message="node limit 2/2 on node-7",
        decided_at=NOW,
        replica="arbitrator-0",
    )
    assert codec.decode(codec.encode(decision), Decision) == decision
    record = AuditRecord(
        id="j/phase/Running",
        time=NOW,
        action="phase.changed",
        actor="tracker-1",
        job="j",
        phase="Running",
        previous_phase="Pending",
    )
    assert codec.decode(codec.encode(record), AuditRecord) == record
    with pytest.raises(SchemaError) as err:
        codec.decode(codec.encode(record).replace(b'"Running"', b'"Sprinting"'), AuditRecord)
    assert err.value.field == "phase"


def test_own_messages_tolerate_new_optional_fields() -> None:
    document = json.loads(codec.encode(IntentReply(ok=False)))
    document["retryAfter"] = "5s"
    assert codec.decode(json.dumps(document), IntentReply).ok is False


def test_dead_letter_keeps_the_raw_bytes() -> None:
    letter = DeadLetter(
        subject="podherd.intents.default",
        consumer="tracker",
        error="bad",
        received_at=NOW,
        data=b"\x00{not json",
    )
    assert codec.decode(codec.encode(letter), DeadLetter).data == b"\x00{not json"
