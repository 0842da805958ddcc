"""What a job write by someone other than Podherd asks for, each effect with its permission, and what only
Podherd may write (pure)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from services.gate.effects import Write, effects, kept_for_podherd, refused_effect, write_of
from shared.api.drain import node_hash
from shared.api.names import (
    ANNOTATION_ABORT,
    ANNOTATION_CLAIMED_REQUESTER,
    ANNOTATION_DRAIN_NODE,
    ANNOTATION_LEDGER,
    ANNOTATION_LIFTS,
    ANNOTATION_MIGRATION_PRIORITY,
    ANNOTATION_OWN_ROOM,
    ANNOTATION_REQUESTER,
    ANNOTATION_STRATEGY,
    ANNOTATION_TARGET_NODE,
    LABEL_DRAIN,
    LABEL_EVACUATED_POD,
)

SPEC = {"podRef": {"kind": "Pod", "namespace": "shop", "name": "web"}}


def job(
    annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None, **spec: Any
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "j", "annotations": annotations or {}, "labels": labels or {}}
    return {"metadata": meta, "spec": {**SPEC, **spec}}


def made(annotations: dict[str, str] | None = None, **more: Any) -> Write:
    return write_of(job(annotations, **more), None, author="alice")


def wanted(write: Write) -> list[str]:
    return [" or ".join(str(n) for n in e.needs) for e in effects(write)]


def test_making_a_job_needs_the_eviction_and_each_steering_annotation_its_own_permission() -> None:
    assert wanted(made()) == ["create pods/eviction web in namespace shop"]
    steered = made(
        {
            ANNOTATION_TARGET_NODE: "node-2",
            ANNOTATION_LIFTS: "BarePod,LocalStorage",
            ANNOTATION_MIGRATION_PRIORITY: "5",
            ANNOTATION_DRAIN_NODE: "node-1",
        },
        labels={LABEL_DRAIN: node_hash("node-1")},
    )
    assert wanted(steered) == [
        "create pods/eviction web in namespace shop",
        "create pods/binding web in namespace shop",
        "delete pods web in namespace shop",
        "patch nodes node-1",
        "create podmigrationjobs/priority.scheduling.koordinator.sh",
    ]
    surge = write_of(job({ANNOTATION_STRATEGY: "Surge"}), None, author="alice")
    surge = msgspec.structs.replace(surge, deployment="web")
    scale = "deployments/scale.apps web in namespace shop"
    assert wanted(surge)[1] == f"update {scale} or patch {scale}"
    assert wanted(made({ANNOTATION_MIGRATION_PRIORITY: "0", ANNOTATION_LIFTS: "LocalStorage"})) == [
        "create pods/eviction web in namespace shop"
    ]


def test_an_update_asks_only_for_what_it_changes_and_an_abort_by_its_requester_needs_nothing_more() -> None:
    before = job({ANNOTATION_REQUESTER: "alice", ANNOTATION_TARGET_NODE: "node-2"})
    note = job({ANNOTATION_REQUESTER: "alice", ANNOTATION_TARGET_NODE: "node-2", "note": "x"})
    assert effects(write_of(note, before, author="bob")) == []
    unpinned = job({ANNOTATION_REQUESTER: "alice"})
    assert wanted(write_of(unpinned, before, author="bob")) == ["create pods/eviction web in namespace shop"]
    resumed = job({ANNOTATION_REQUESTER: "alice", ANNOTATION_TARGET_NODE: "node-2"}, paused=False)
    assert wanted(write_of(resumed, before, author="bob"))[0] == "create pods/eviction web in namespace shop"
    aborted = job({ANNOTATION_REQUESTER: "alice", ANNOTATION_TARGET_NODE: "node-2", ANNOTATION_ABORT: "x"})
    assert wanted(write_of(aborted, before, author="alice")) == ["create pods/eviction web in namespace shop"]
    assert (
        wanted(write_of(aborted, before, author="bob"))[1]
        == "delete podmigrationjobs.scheduling.koordinator.sh j"
    )
    [_, abort] = effects(write_of(aborted, before, author="bob"))
    refusal = refused_effect("bob", abort, "no RBAC policy matched")
    assert refusal.code == 403 and refusal.message.startswith('user "bob" may not delete podmigrationjobs')
    assert "ends a job alice asked for: no RBAC policy matched" in refusal.message


@pytest.mark.parametrize(
    "annotations,labels,name",
    [
        ({ANNOTATION_LEDGER: "{}"}, {}, "j"),
        ({ANNOTATION_OWN_ROOM: "r"}, {}, "j"),
        ({ANNOTATION_CLAIMED_REQUESTER: "podherd-planner"}, {}, "j"),
        ({ANNOTATION_REQUESTER: "mallory"}, {}, "j"),
        ({}, {LABEL_EVACUATED_POD: "abc"}, "j"),
        ({}, {}, "evacuation-1234"),
        ({ANNOTATION_DRAIN_NODE: "node-1"}, {LABEL_DRAIN: node_hash("node-2")}, "j"),
    ],
)
def test_what_only_podherd_writes_is_refused_to_an_author(
    annotations: dict[str, str], labels: dict[str, str], name: str
) -> None:
    document = job(annotations, labels)
    document["metadata"]["name"] = name
    refusal = kept_for_podherd(write_of(document, None, author="alice"))
    assert refusal is not None and refusal.code in (403, 422)


def test_the_author_may_name_only_themselves_as_requester_and_no_one_may_change_it() -> None:
    assert kept_for_podherd(made({ANNOTATION_REQUESTER: "alice"})) is None
    before = job({ANNOTATION_REQUESTER: "alice", ANNOTATION_LEDGER: "{}"})
    for after in ({ANNOTATION_REQUESTER: "bob", ANNOTATION_LEDGER: "{}"}, {ANNOTATION_LEDGER: "{}"}):
        assert kept_for_podherd(write_of(job(after), before, author="bob")) is not None
    assert (
        kept_for_podherd(write_of(job({ANNOTATION_REQUESTER: "alice"}), before, author="alice")) is not None
    )
    same = job({ANNOTATION_REQUESTER: "alice", ANNOTATION_LEDGER: "{}", "note": "x"})
    assert kept_for_podherd(write_of(same, before, author="bob")) is None
