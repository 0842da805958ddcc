"""The watchdog's surge invariant, replayed from events: a surging Deployment never below its Ready count."""

from __future__ import annotations

import json
from typing import Any

from podherd.watchdog.surge_floor import surge_floor_breaches

RS = {
    "metadata": {
        "namespace": "d",
        "name": "web-1",
        "ownerReferences": [{"kind": "Deployment", "name": "web", "controller": True}],
    }
}


def pod(uid: str, *, ready: bool, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "namespace": "d",
        "name": uid,
        "uid": uid,
        "ownerReferences": [{"kind": "ReplicaSet", "name": "web-1", "controller": True}],
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-11-25T00:00:00Z"
    status = {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    return {"metadata": meta, "status": status}


def deployment(record: dict[str, Any] | None) -> dict[str, Any]:
    annotations = {"podherd.io/surge": json.dumps(record)} if record else {}
    return {"metadata": {"namespace": "d", "name": "web", "annotations": annotations}}


SURGING = deployment({"job": "j", "jobUid": "u", "replicas": 1})


# A Ready pod's Deployment starts surging for it, and the surge's pod is created, not Ready yet.
SURGE_STARTS = (
    ("ReplicaSet", "ADDED", RS),
    ("Pod", "ADDED", pod("old", ready=True)),
    ("Deployment", "MODIFIED", SURGING),
    ("Pod", "ADDED", pod("new", ready=False)),
)


def events(*steps: tuple[str, str, dict[str, Any]]) -> list[tuple[int, str, str, dict[str, Any]]]:
    return [(i, kind, kind_type, obj) for i, (kind, kind_type, obj) in enumerate(steps, start=1)]


def test_a_surge_that_keeps_its_pod_until_the_new_one_is_ready_breaks_nothing() -> None:
    assert surge_floor_breaches(
        events(
            *SURGE_STARTS,
            ("Pod", "MODIFIED", pod("new", ready=True)),
            ("Pod", "MODIFIED", pod("old", ready=True, deleting=True)),
            ("Pod", "DELETED", pod("old", ready=True, deleting=True)),
            ("Deployment", "MODIFIED", deployment(None)),
        )
    ) == ([], 1)


def test_losing_the_old_pod_before_the_new_one_is_ready_is_a_breach() -> None:
    assert surge_floor_breaches(
        events(
            *SURGE_STARTS,
            ("Pod", "MODIFIED", pod("old", ready=True, deleting=True)),
        )
    ) == (["d/web: 0 Ready pods during its surge, fewer than 1"], 1)


def test_outside_a_surge_and_below_what_it_had_already_nothing_is_counted() -> None:
    assert surge_floor_breaches(
        events(
            ("ReplicaSet", "ADDED", RS),
            ("Pod", "ADDED", pod("old", ready=False)),  # not Ready before the surge: the floor is 0
            ("Deployment", "MODIFIED", SURGING),
            ("Pod", "DELETED", pod("old", ready=False)),
            ("Deployment", "MODIFIED", deployment(None)),
            ("Pod", "ADDED", pod("other", ready=True)),
            ("Pod", "DELETED", pod("other", ready=True)),
        )
    ) == ([], 1)
