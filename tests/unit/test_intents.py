"""Intents as jobs (pure): names from the idempotency key, what the job carries, what conflicts."""

from __future__ import annotations

import re
from typing import Any

import pytest

from shared.api import codec
from shared.api.messages import MigrationIntent, PodKey
from shared.intake.intent_jobs import conflict, job_for, job_name

DNS_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def intent(key: str = "defrag-1", pod: str = "web-0", **extra: Any) -> MigrationIntent:
    return MigrationIntent(
        idempotency_key=key, pod=PodKey(namespace="default", name=pod), requester="defragmenter", **extra
    )


def test_the_name_depends_on_the_key_only_and_is_a_valid_object_name() -> None:
    assert job_name("k") == job_name("k") != job_name("k2")
    assert (
        job_for(intent("k", "a"), "u").metadata.name
        == job_for(intent("k", "b"), "u").metadata.name
        == job_name("k")
    )
    long_key = "x" * 200
    assert DNS_NAME.match(job_name(long_key)) and len(job_name(long_key)) <= 63


def test_the_job_carries_the_intent() -> None:
    job = job_for(
        intent(
            target_node="node-7", mode="EvictDirectly", ttl="10m", priority=5, reason="defrag", paused=True
        ),
        "system:serviceaccount:tools:defragmenter",
    )
    assert job.api_version == "scheduling.koordinator.sh/v1alpha1" and job.kind == "PodMigrationJob"
    assert job.spec.pod_ref is not None
    assert (job.spec.pod_ref.namespace, job.spec.pod_ref.name) == ("default", "web-0")
    assert (job.spec.mode, job.spec.ttl, job.spec.paused) == ("EvictDirectly", "10m", True)
    annotations = job.metadata.annotations or {}
    assert annotations["podherd.io/target-node"] == "node-7"
    assert annotations["podherd.io/migration-priority"] == "5"
    # The requester as verified, and what the intent claimed beside it.
    assert annotations["podherd.io/requester"] == "system:serviceaccount:tools:defragmenter"
    assert annotations["podherd.io/claimed-requester"] == "defragmenter"
    assert annotations["podherd.io/intent-id"] == "defrag-1"
    # The job round-trips through the wire format the API server stores.
    assert codec.decode(codec.encode(job), type(job)) == job


def test_the_job_records_where_the_pod_was_and_whose_it_is() -> None:
    """What a plan reads so as not to undo the move: the pod's node and controller when the job was made."""
    owners = [{"kind": "ReplicaSet", "name": "web-5d", "controller": True}, {"kind": "Other", "name": "x"}]
    found = {"metadata": {"ownerReferences": owners}, "spec": {"nodeName": "node-3"}}
    annotations = job_for(intent(), "u", found=found).metadata.annotations or {}
    assert annotations["podherd.io/source-node"] == "node-3"
    assert annotations["podherd.io/workload"] == "ReplicaSet/web-5d"
    bare = job_for(intent(), "u", found={"metadata": {}, "spec": {}}).metadata.annotations or {}
    assert "podherd.io/source-node" not in bare and "podherd.io/workload" not in bare


@pytest.mark.parametrize(
    ("existing", "wanted", "expected"),
    [
        (intent(), intent(), None),
        (intent(), intent(target_node="other"), None),  # the job exists: a repeat is the same job
        (intent(pod="web-0"), intent(pod="web-1"), "was used for default/web-0, not default/web-1"),
        (intent(key="a"), intent(key="b"), "belongs to another intent"),
    ],
)
def test_conflicts(existing: MigrationIntent, wanted: MigrationIntent, expected: str | None) -> None:
    found = conflict(job_for(existing, "u"), wanted)
    assert found is None if expected is None else (found is not None and expected in found)
