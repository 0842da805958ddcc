"""A migration's time, cut at the milestones the cluster's history shows: every second assigned, once."""

from __future__ import annotations

from typing import Any

from bench.phases import Change, milestones, phases, report


def pmj(name: str, phase: str | None = None) -> dict[str, Any]:
    status = {"phase": phase} if phase else {}
    return {
        "metadata": {"name": name},
        "spec": {"podRef": {"namespace": "default", "name": "web-1"}},
        "status": status,
    }


def pod(name: str, **fields: Any) -> dict[str, Any]:
    meta = {"namespace": "default", "name": name}
    if fields.pop("terminating", False):
        meta["deletionTimestamp"] = "2026-11-24T10:00:00Z"
    conditions = [{"type": "Ready", "status": "True"}] if fields.pop("ready", False) else []
    return {
        "metadata": meta,
        "spec": {"nodeName": fields.pop("node", None)},
        "status": {"conditions": conditions},
    }


def reservation(phase: str, taker: str | None = None) -> dict[str, Any]:
    owners = [{"namespace": "default", "name": taker}] if taker else []
    labels = {"podherd.io/job": "j1"}
    return {"metadata": {"name": "j1", "labels": labels}, "status": {"phase": phase, "currentOwners": owners}}


HISTORY = [
    Change(10.0, "ADDED", "podmigrationjobs", pmj("j1")),
    Change(11.0, "MODIFIED", "podmigrationjobs", pmj("j1", "Running")),
    Change(11.5, "ADDED", "reservations", reservation("Pending")),
    Change(12.0, "MODIFIED", "reservations", reservation("Available")),
    Change(14.0, "MODIFIED", "pods", pod("web-1", node="n1", terminating=True)),
    # The ReplicaSet replaces the pod as soon as it is marked: before it is gone.
    Change(14.1, "ADDED", "pods", pod("web-2")),
    Change(14.2, "MODIFIED", "reservations", reservation("Succeeded", taker="web-2")),
    Change(14.2, "MODIFIED", "pods", pod("web-2", node="n2")),
    Change(14.5, "DELETED", "pods", pod("web-1", node="n1", terminating=True)),
    Change(15.0, "MODIFIED", "pods", pod("web-2", node="n2", ready=True)),
    Change(16.0, "MODIFIED", "podmigrationjobs", pmj("j1", "Succeeded")),
    Change(17.0, "MODIFIED", "pods", pod("web-2", node="n2", ready=True)),  # after the end: no effect
]


def test_phases_add_up_to_the_job_and_overlapping_milestones_count_once() -> None:
    job_phases = phases(milestones(HISTORY)["j1"])
    assert job_phases == {
        "queued": 1.0,
        "reserve_asked": 0.5,
        "reserve": 0.5,
        "evict_asked": 2.0,
        "evict": 0.5,
        "replace": 0.0,  # bound (14.2) before the old pod was gone (14.5): counted at the latter
        "ready": 0.5,
        "confirm": 1.0,
    }
    assert abs(sum(job_phases.values()) - 6.0) < 1e-9


def test_the_report_splits_podherd_from_the_cluster_with_nothing_unassigned() -> None:
    summary = report(HISTORY)
    assert summary["jobs"] == 1 and summary["unassigned_s_max"] == 0
    assert summary["podherd_s"]["p50"] == 4.5  # queued 1 + reserve asked 0.5 + evict asked 2 + confirm 1
    assert summary["cluster_s"]["p50"] == 1.5
