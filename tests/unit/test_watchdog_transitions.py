"""The chaos watchdog's excuse for a workload its controller is changing: from the rollout or scaling until
every replica has been available once; a gap before the change, or after it completed, is a breach."""

from __future__ import annotations

from typing import Any

from podherd.watchdog.invariants import transitioning


def deployment(
    *, generation: int = 2, observed: int = 2, updated: int = 4, available: int = 4
) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "ns", "name": "web", "generation": generation},
        "spec": {"replicas": 4},
        "status": {
            "observedGeneration": observed,
            "replicas": 4,
            "updatedReplicas": updated,
            "availableReplicas": available,
        },
    }


def test_a_rollout_is_in_transition_until_every_new_replica_was_available() -> None:
    steps = [
        deployment(observed=1, updated=0, available=4),  # the template changed: not yet observed
        deployment(updated=2, available=3),  # new pods replacing old ones
        deployment(updated=4, available=2),  # every pod updated, two of them still starting
        deployment(updated=4, available=4),  # done
        deployment(updated=4, available=3),  # later: a pod gone is a disruption, not the rollout's
    ]
    was, seen = False, []
    for step in steps:
        was = transitioning(step, was=was)
        seen.append(was)
    assert seen == [True, True, True, False, False]


def test_a_settled_workload_never_in_transition_is_not_excused_for_a_gap() -> None:
    assert not transitioning(deployment(generation=1, observed=1, available=3), was=False)


def test_a_breach_names_each_unhealthy_pod_where_and_since_when() -> None:
    from podherd.watchdog.invariants import _healthy, _why_unhealthy

    ready = {"type": "Ready", "status": "True"}
    unready = {"type": "Ready", "status": "False", "lastTransitionTime": "2026-11-26T03:40:01Z"}
    pods = [
        {"metadata": {"name": "a"}, "spec": {"nodeName": "n1"}, "status": {"conditions": [ready]}},
        {"metadata": {"name": "b"}, "spec": {"nodeName": "n2"}, "status": {"conditions": [unready]}},
        {
            "metadata": {"name": "c", "deletionTimestamp": "2026-11-26T03:40:02Z"},
            "spec": {"nodeName": "n3"},
            "status": {"conditions": [ready]},
        },
    ]
    assert [_why_unhealthy(p) for p in pods if not _healthy(p)] == [
        "b on n2 not Ready since 2026-11-26T03:40:01Z",
        "c on n3 deleted 2026-11-26T03:40:02Z",
    ]
