"""Where a migration's time goes, from the cluster's own history of changes (kubesim's event log).

A job's life is cut at milestones, each read from the first change that shows it: created (the PMJ
added), admitted (its phase Running), reserve asked (its Reservation created), room held (the Reservation
Available), eviction (its pod marked for deletion), pod gone (deleted), replacement bound (the pod that
took the Reservation, on its node), replacement ready, ended (the phase Succeeded or Failed). A milestone
earlier than the one before it (the ReplicaSet makes the replacement as soon as the old pod is marked) is
counted at the one before, and one after the job's end at its end, so a job's phases add up to its
end-to-end time exactly. Each phase is either
Podherd's (from the change that made progress possible to Podherd's next write) or the cluster's (the
scheduler, kubelet and controllers at work); a milestone a job never reached (EvictDirectly makes no
Reservation) adds nothing.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

# (phase, whose time, the milestone that ends it)
PHASES = (
    ("queued", "podherd", "admitted"),
    ("reserve_asked", "podherd", "reserve_asked"),
    ("reserve", "cluster", "room_held"),
    ("evict_asked", "podherd", "eviction"),
    ("evict", "cluster", "pod_gone"),
    ("replace", "cluster", "replacement_bound"),
    ("ready", "cluster", "replacement_ready"),
    ("confirm", "podherd", "ended"),
)


@dataclass
class Change:
    """One change of the cluster, as kubesim's event log holds it."""

    at: float
    type: str
    plural: str
    obj: Mapping[str, Any]


@dataclass
class Milestones:
    created: float | None = None
    at: dict[str, float] = field(default_factory=dict)
    pod: tuple[str, str] | None = None
    reservation: str | None = None

    def reach(self, name: str, at: float) -> None:
        self.at.setdefault(name, at)


def milestones(changes: Iterable[Change]) -> dict[str, Milestones]:
    """Each job's milestones (by job name)."""
    jobs: dict[str, Milestones] = {}
    by_pod: dict[tuple[str, str], str] = {}
    by_reservation: dict[str, str] = {}
    replacement_of: dict[tuple[str, str], str] = {}
    for change in sorted(changes, key=lambda c: c.at):
        meta = change.obj.get("metadata") or {}
        status = change.obj.get("status") or {}
        if change.plural == "podmigrationjobs":
            job = jobs.setdefault(meta.get("name", ""), Milestones())
            if job.created is None:
                job.created = change.at
                ref = (change.obj.get("spec") or {}).get("podRef") or {}
                job.pod = (ref.get("namespace", ""), ref.get("name", ""))
                by_pod[job.pod] = meta.get("name", "")
            if status.get("phase") == "Running":
                job.reach("admitted", change.at)
            if status.get("phase") in ("Succeeded", "Failed", "Aborted"):
                job.reach("ended", change.at)
        elif change.plural == "reservations":
            owner = (meta.get("labels") or {}).get("podherd.io/job")
            if owner not in jobs:
                continue
            job = jobs[owner]
            by_reservation.setdefault(meta.get("name", ""), owner)
            job.reach("reserve_asked", change.at)
            if status.get("phase") == "Available":
                job.reach("room_held", change.at)
            for taker in status.get("currentOwners") or ():
                replacement_of.setdefault((taker.get("namespace", ""), taker.get("name", "")), owner)
        elif change.plural == "pods":
            key = (meta.get("namespace", ""), meta.get("name", ""))
            if key in by_pod:
                job = jobs[by_pod[key]]
                if meta.get("deletionTimestamp"):
                    job.reach("eviction", change.at)
                if change.type == "DELETED":
                    job.reach("pod_gone", change.at)
            if key in replacement_of:
                job = jobs[replacement_of[key]]
                if (change.obj.get("spec") or {}).get("nodeName"):
                    job.reach("replacement_bound", change.at)
                if any(
                    c.get("type") == "Ready" and c.get("status") == "True"
                    for c in status.get("conditions") or ()
                ):
                    job.reach("replacement_ready", change.at)
    return jobs


def phases(job: Milestones) -> dict[str, float]:
    """The job's phases in seconds: each milestone at the latest of itself and the ones before, and no later
    than the job's end (an old pod may still be going when the job has ended)."""
    if job.created is None or "ended" not in job.at:
        return {}
    out: dict[str, float] = {}
    last, ended = job.created, job.at["ended"]
    for phase, _whose, milestone in PHASES:
        at = job.at.get(milestone)
        if at is None:
            continue
        at = min(max(at, last), ended)
        out[phase] = at - last
        last = at
    return out


def report(changes: Iterable[Change]) -> dict[str, Any]:
    """p50 / p99 of each phase over the jobs that ended, Podherd's and the cluster's sums, and how far the
    phases' sum is from the end-to-end latency (0 by construction; reported as the check it is)."""
    per_job = [(job, phases(job)) for job in milestones(changes).values()]
    per_job = [(job, p) for job, p in per_job if p]
    if not per_job:
        return {}
    whose = {phase: side for phase, side, _ in PHASES}
    out: dict[str, Any] = {"jobs": len(per_job), "phases_s": {}}
    for phase, _side, _ in PHASES:
        values = [p[phase] for _, p in per_job if phase in p]
        if values:
            out["phases_s"][phase] = {
                "whose": whose[phase],
                "p50": _pct(values, 0.5),
                "p99": _pct(values, 0.99),
            }
    for side in ("podherd", "cluster"):
        sums = [sum(v for k, v in p.items() if whose[k] == side) for _, p in per_job]
        out[f"{side}_s"] = {
            "p50": _pct(sums, 0.5),
            "p99": _pct(sums, 0.99),
            "mean": round(statistics.mean(sums), 3),
        }
    gaps = [abs(sum(p.values()) - (job.at["ended"] - (job.created or 0.0))) for job, p in per_job]
    out["unassigned_s_max"] = round(max(gaps), 6)
    return out


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)
