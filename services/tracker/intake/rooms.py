"""Whether a job waiting paused, the room for its pod reserved ahead, has that room yet: read from the job and
its Reservation (an atomic drain's and an atomic plan's view of each of its jobs)."""

from __future__ import annotations

from typing import Any

from services.tracker.jobs.decode import reservation_view
from shared.api import paths
from shared.api.pmj import MODE_EVICT_DIRECTLY, TERMINAL_PHASES
from shared.api.reservation import reservation_name
from shared.drain_plan import Room
from shared.kube import KubeClient


def pod_of(job: dict[str, Any]) -> str:
    ref = (job.get("spec") or {}).get("podRef") or {}
    return f"{ref.get('namespace', '')}/{ref.get('name', '')}"


async def room_of(kube: KubeClient, name: str, job: dict[str, Any] | None) -> Room:
    """`job`: the job `name` as read (None: gone, and needing no room)."""
    if job is None:
        return Room(name, placed=True)
    pod = pod_of(job)
    status = job.get("status") or {}
    mode = (job.get("spec") or {}).get("mode")
    if status.get("phase") in TERMINAL_PHASES or mode == MODE_EVICT_DIRECTLY:
        return Room(pod, placed=True)
    found = await kube.get_json(paths.reservation(reservation_name(name)))
    if found is None:
        return Room(pod, placed=False, why=status.get("message") or "its Reservation is not created yet")
    held = reservation_view(found)
    if held.node:  # placed (it may have expired since, with the drain's timeout: it had room)
        return Room(pod, placed=True)
    return Room(pod, placed=False, why=held.unschedulable or f"Reservation {held.name} is {held.phase}")
