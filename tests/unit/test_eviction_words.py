"""What an evict command reports when it finds its pod already being deleted (pure): an eviction's doing, or
someone else's deletion (its controller scaling down), which the tracker then ends as MissingPod."""

from __future__ import annotations

from typing import Any

import pytest

from services.executor.reporting import word_on_going
from shared.api.pod import pod_from


def going(*conditions: dict[str, Any]) -> Any:
    return pod_from(
        {
            "metadata": {
                "namespace": "default",
                "name": "web-0",
                "deletionTimestamp": "2026-11-26T03:00:00Z",
            },
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}, *conditions]},
        }
    )


EVICTED = {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}
PREEMPTED = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}


def test_a_pod_the_eviction_api_is_deleting_was_evicted() -> None:
    assert word_on_going(going(EVICTED), "Eviction") == (
        "done",
        "pod default/web-0 was already being evicted",
    )


@pytest.mark.parametrize("conditions", [(), (PREEMPTED,)])
def test_a_pod_deleted_outright_or_preempted_is_someone_elses_doing(
    conditions: tuple[dict[str, Any], ...],
) -> None:
    assert word_on_going(going(*conditions), "Eviction") == (
        "gone",
        "pod default/web-0 is being deleted by others",
    )


@pytest.mark.parametrize("policy", ["Delete", "SoftEviction"])
def test_deleting_or_soft_evicting_leaves_no_mark_so_a_going_pod_counts_as_done(policy: str) -> None:
    assert word_on_going(going(), policy)[0] == "done"
