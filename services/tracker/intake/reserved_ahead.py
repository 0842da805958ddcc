"""What atomic drains and atomic plans share: jobs waiting paused with the room for their pods reserved
ahead. Whether a job has that room yet (read from the job and its Reservation); a job patched (unpaused or
aborted); the outcome on the audit stream."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

import nats.errors
import redis.asyncio as aioredis

from services.tracker.jobs.decode import reservation_view
from shared.api import paths
from shared.api.audit import actor, audit_record
from shared.api.drain import MOVING, node_hash
from shared.api.pmj import MODE_EVICT_DIRECTLY, TERMINAL_PHASES
from shared.api.pmj_read import pod_of
from shared.api.reservation import reservation_name
from shared.core.waits import wait_event
from shared.intake.drain_plan import Room
from shared.kube.client import KubeClient, KubeError
from shared.nats import bus
from shared.nats.publisher import Publisher, PublishError

log = logging.getLogger(__name__)
EVERY = 0.5  # seconds between looks at what is reserving room


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


async def patch_job(kube: KubeClient, job: str, patch: dict[str, Any]) -> bool:
    """The job patched (merge patch); False when it is gone."""
    try:
        await kube.arequest("PATCH", paths.job(job), body=patch, content_type="application/merge-patch+json")
    except KubeError as exc:
        if exc.status != 404:
            raise
        return False
    return True


async def announce(
    publisher: Publisher,
    subjects: bus.Subjects,
    *,
    of: Literal["drain", "plan"],
    name: str,
    phase: str,
    no_room: list[str],
) -> None:
    """An atomic drain's (of node `name`) or atomic plan's outcome on the audit stream."""
    what = f"atomic drain of node {name}" if of == "drain" else f"atomic plan {name}"
    everything = "every pod" if of == "drain" else "every move"
    record = audit_record(
        of,
        name,
        "atomic",
        phase,
        by=actor("tracker", None),
        message=f"{what}: room reserved for {everything}; moving them"
        if phase == MOVING
        else f"{what} rolled back: no room for {'; '.join(no_room)}",
        details={"node" if of == "drain" else "plan": name, "phase": phase},
    )
    await publisher.publish_audit(subjects.audit(f"{of}-{node_hash(name)}"), record)
    await publisher.flush()


async def settle_each(
    client: aioredis.Redis, settlers: Mapping[str, Callable[[str], Awaitable[None]]], *, stop: asyncio.Event
) -> None:
    """Every EVERY seconds until `stop`, for each Redis set of `settlers` (the drains' nodes, the plans'
    names), settle each of its members with the set's own function; an outage of the API, Redis or NATS
    is tried again the next time."""
    while not stop.is_set():
        for key, settle in settlers.items():
            try:
                for member in await client.smembers(key):
                    await settle(member.decode() if isinstance(member, bytes) else str(member))
            except (KubeError, OSError, aioredis.RedisError, PublishError, nats.errors.Error) as exc:
                log.warning("%s: %s; trying again", key, exc)
        await wait_event(stop, EVERY)
