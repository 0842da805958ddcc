"""Atomic drains (`podherd drain --atomic`): room for every pod reserved before any pod is evicted.

An atomic drain's jobs are created paused; each has its room reserved at once (outside the migration limits:
a Reservation only holds capacity) and waits. Here, for each node whose record says `Reserving`: once every
job has its room, the jobs are unpaused together (the arbitrator then paces the evictions as for any job)
and the record says `Moving`; if the drain's timeout passes first, every job is aborted (which releases its
Reservation), the node is uncordoned unless it was cordoned before, and the record says `RolledBack`,
naming each pod that found no room. Nothing was evicted.

The state is the node's record, not this process: every tracker replica looks after the nodes of the paused
jobs it reconciles (a Redis set, filled again by their reconciles if Redis loses it), so a drain whose CLI
was killed is finished or rolled back all the same.
"""

from __future__ import annotations

import time
from typing import Any

import msgspec
import redis.asyncio as aioredis

from services.tracker.intake.reserved_ahead import announce, patch_job, room_of
from services.tracker.keys import TrackerKeys
from shared.api import paths
from shared.api.drain import MOVING, RESERVING, ROLLED_BACK, DrainRecord, drain_record
from shared.api.names import ANNOTATION_ABORT, ANNOTATION_NODE_DRAIN
from shared.core.durations import parse_duration
from shared.intake.drain_plan import Room, atomic_step
from shared.kube.client import KubeClient, KubeError
from shared.nats import bus
from shared.nats.publisher import Publisher


class AtomicDrains:
    def __init__(
        self,
        client: aioredis.Redis,
        keys: TrackerKeys,
        kube: KubeClient,
        *,
        publisher: Publisher,
        subjects: bus.Subjects,
        default_ttl: str,
    ) -> None:
        self.client, self.keys, self.kube = client, keys, kube
        self.publisher, self.subjects, self.default_ttl = publisher, subjects, default_ttl

    async def settle(self, node: str) -> None:
        """One look at a node's atomic drain: decide its next phase once every pod has room or its timeout
        passed, record it on the node (first: whoever reads the record knows how the drain ends), then
        unpause or abort every job (again after a crash in between: the jobs' reconciles bring it back)."""
        for _ in range(5):
            found = await self.kube.get_json(paths.node(node))
            record = drain_record(found)
            if found is None or record is None or record.phase is None:
                await self.client.srem(self.keys.atomic_drains, node)
                return
            if record.phase == RESERVING:
                rooms = [await self._room(job) for job in record.jobs]
                deadline = record.began.timestamp() + parse_duration(
                    record.options.timeout or self.default_ttl
                )
                phase, no_room = atomic_step(rooms, now=time.time(), deadline=deadline)
                if phase == RESERVING:
                    return
                record = msgspec.structs.replace(record, phase=phase, no_room=no_room)
                if not await self._record(found, record):
                    continue  # the node changed meanwhile: read it again
                await self._audit(node, phase, no_room)
            await self._apply(node, record)
            await self.client.srem(self.keys.atomic_drains, node)
            return

    async def _apply(self, node: str, record: DrainRecord) -> None:
        if record.phase == MOVING:
            patch: dict[str, Any] = {"spec": {"paused": False}}
        else:
            why = f"atomic drain of node {node} rolled back: no room for {'; '.join(record.no_room)}"
            patch = {"metadata": {"annotations": {ANNOTATION_ABORT: why}}}
        for job in record.jobs:
            await self._patch_job(job, patch)

    async def _room(self, job: str) -> Room:
        return await room_of(self.kube, job, await self.kube.get_json(paths.job(job)))

    async def _patch_job(self, job: str, patch: dict[str, Any]) -> None:
        await patch_job(self.kube, job, patch)

    async def _record(self, node: dict[str, Any], record: DrainRecord) -> bool:
        """The drain's new phase on the node (uncordoned when rolled back, unless it was cordoned before),
        on the resourceVersion read: False when the node changed meanwhile (looked at again next time)."""
        meta = node.get("metadata") or {}
        patch: dict[str, Any] = {
            "metadata": {
                "resourceVersion": meta.get("resourceVersion"),
                "annotations": {ANNOTATION_NODE_DRAIN: msgspec.json.encode(record).decode()},
            }
        }
        if record.phase == ROLLED_BACK and not record.cordoned_before:
            patch["spec"] = {"unschedulable": None}
        try:
            await self.kube.arequest(
                "PATCH",
                paths.node(meta.get("name") or ""),
                body=patch,
                content_type="application/merge-patch+json",
            )
        except KubeError as exc:
            if exc.status == 409:
                return False
            raise
        return True

    async def _audit(self, node: str, phase: str, no_room: list[str]) -> None:
        await announce(self.publisher, self.subjects, of="drain", name=node, phase=phase, no_room=no_room)
