"""Koordinator's migration controller, modelled on the jobs of a run, for a side-by-side comparison.

The model takes each job's creation time and the cluster's own times from the run (how long the
Reservation took to be scheduled, the old pod to go, its replacement to be bound and Ready: see
bench.phases) and replays them through Koordinator's shape: an arbitration pass every `arbitration`
seconds admits what was created before it; one reconcile worker, each reconcile costing `reconcile`
seconds of it, creates the Reservation, then requeues the job every `requeue` seconds until the
Reservation is Available, evicts, requeues until the pod is gone, then until the replacement is Ready, and
marks the job Succeeded. Limits are taken as open (as in `--limits open`), so only the controller's own
pace shows.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from bench.phases import Milestones


@dataclass(frozen=True)
class ClusterTimes:
    created: float
    reserve: float  # Reservation created -> Available
    evict: float  # eviction -> old pod gone
    replace: float  # old pod gone -> replacement bound and Ready


def cluster_times(jobs: Iterable[Milestones]) -> list[ClusterTimes]:
    """The cluster's part of each job that went the whole way (Reservation, eviction, replacement)."""
    out = []
    for job in jobs:
        at = job.at
        needed = ("reserve_asked", "room_held", "eviction", "pod_gone", "replacement_ready")
        if job.created is None or not all(k in at for k in needed):
            continue
        out.append(
            ClusterTimes(
                created=job.created,
                reserve=max(0.0, at["room_held"] - at["reserve_asked"]),
                evict=max(0.0, at["pod_gone"] - at["eviction"]),
                replace=max(0.0, at["replacement_ready"] - at["pod_gone"]),
            )
        )
    return out


def replay(
    jobs: list[ClusterTimes], *, requeue: float = 3.0, arbitration: float = 0.5, reconcile: float = 0.01
) -> dict[str, Any]:
    """Each job's creation-to-Succeeded latency under the model; throughput, p50 / p99, makespan."""
    if not jobs:
        return {}
    start = min(j.created for j in jobs)
    # (when the reconcile is due, job index, step): step 0 reserve, 1 wait room, 2 wait gone, 3 wait ready.
    due: list[tuple[float, int, int]] = []
    for i, job in enumerate(jobs):
        admitted = start + math.ceil((job.created - start) / arbitration + 1e-9) * arbitration
        heapq.heappush(due, (admitted, i, 0))
    ready_at: dict[tuple[int, int], float] = {}
    ended: dict[int, float] = {}
    worker_free = start
    while due:
        when, i, step = heapq.heappop(due)
        now = max(when, worker_free) + reconcile  # one worker: reconciles wait their turn
        worker_free = now
        job = jobs[i]
        if step == 0:  # Reservation created: Available `reserve` later
            ready_at[(i, 1)] = now + job.reserve
            heapq.heappush(due, (now + requeue, i, 1))
        elif now < ready_at[(i, step)]:
            heapq.heappush(due, (now + requeue, i, step))  # not yet: requeued
        elif step == 1:  # room held: evict; the pod is gone `evict` later
            ready_at[(i, 2)] = now + job.evict
            heapq.heappush(due, (now + requeue, i, 2))
        elif step == 2:  # pod gone: the replacement is Ready `replace` later
            ready_at[(i, 3)] = now + job.replace
            heapq.heappush(due, (now + requeue, i, 3))
        else:
            ended[i] = now
    latencies = sorted(ended[i] - jobs[i].created for i in ended)
    makespan = max(ended.values()) - start
    return {
        "jobs": len(jobs),
        "requeue_s": requeue,
        "arbitration_s": arbitration,
        "reconcile_s": reconcile,
        "makespan_seconds": round(makespan, 2),
        "jobs_per_second": round(len(jobs) / makespan, 1),
        "latency_s_p50": round(latencies[len(latencies) // 2], 2),
        "latency_s_p99": round(latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))], 2),
    }
