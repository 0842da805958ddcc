"""Which policy moves a pod and what its soft eviction says, as Koordinator v1.8.0's evictor interpreter
decides them (evictor/interpreter.go: getCustomEvictionPolicy, GetEvictionTriggerAndReason)."""

from __future__ import annotations

import pytest

from shared.api.eviction_policy import (
    ANNOTATION_EVICT_REASON,
    ANNOTATION_EVICT_TRIGGER,
    LABEL_EVICT_POLICY,
    effective_policy,
    trigger_and_reason,
)


@pytest.mark.parametrize(
    ("pod", "job", "expected"),
    [
        ({}, {}, "Eviction"),
        (
            {LABEL_EVICT_POLICY: "SoftEviction"},
            {LABEL_EVICT_POLICY: "Delete"},
            "SoftEviction",
        ),  # the pod first
        ({}, {LABEL_EVICT_POLICY: "Delete"}, "Delete"),
        ({LABEL_EVICT_POLICY: ""}, {LABEL_EVICT_POLICY: "Delete"}, "Delete"),  # empty: not set
        ({LABEL_EVICT_POLICY: "Teleport"}, {LABEL_EVICT_POLICY: "Delete"}, "Eviction"),  # no such evictor
    ],
)
def test_the_pods_label_then_the_jobs_choose_the_policy(
    pod: dict[str, str], job: dict[str, str], expected: str
) -> None:
    assert effective_policy(pod, job, "Eviction") == expected


def test_a_soft_evictions_initiator_and_reason_are_the_jobs_trigger_and_reason() -> None:
    both = {ANNOTATION_EVICT_TRIGGER: "LowNodeLoad", ANNOTATION_EVICT_REASON: "node-1 is hot"}
    assert trigger_and_reason(both, "j") == ("LowNodeLoad", "node-1 is hot")
    assert trigger_and_reason({ANNOTATION_EVICT_TRIGGER: "LowNodeLoad"}, "j") == (
        "LowNodeLoad",
        "LowNodeLoad",
    )
    assert trigger_and_reason({}, "j") == ("podherd", "migration job j")
