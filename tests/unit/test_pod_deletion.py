"""Whose doing a pod's end is, as the watcher reads it: the Eviction API marks the pod it deletes with the
`DisruptionTarget` condition (reason `EvictionByEvictionAPI`, kube-apiserver's PodDisruptionConditions);
a deletion outright, a preemption or the taint manager leave no such mark or another reason."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from shared.api.objects import RawPod, pod_info


def pod(*conditions: dict[str, Any]) -> RawPod:
    raw = {
        "metadata": {
            "uid": "u",
            "namespace": "default",
            "name": "web-0",
            "deletionTimestamp": "2026-11-26T04:00:00Z",
        },
        "spec": {"nodeName": "node-1", "containers": []},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}, *conditions]},
    }
    return msgspec.convert(raw, RawPod)


@pytest.mark.parametrize(
    ("conditions", "evicted"),
    [
        ([{"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}], True),
        ([], False),
        ([{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}], False),
        ([{"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager"}], False),
    ],
)
def test_only_the_eviction_apis_mark_counts_as_evicted(
    conditions: list[dict[str, Any]], evicted: bool
) -> None:
    assert pod_info(pod(*conditions)).evicted is evicted
