"""Two promises held against the cluster's own history: the watch events of pods, Reservations and
PodMigrationJobs, replayed in resourceVersion order (one storage revision orders every kind, as etcd's does).

- no ReservationFirst eviction unless the job's Reservation, at the resourceVersion the executor read and
  reported (its `room-checked` audit record), was Available, unbound and on another node than the pod;
- no job Succeeded while a pod with its old pod's UID still exists.

An eviction is known by the condition the eviction handler puts on the pod before deleting it
(`DisruptionTarget`, reason `EvictionByEvictionAPI`). The check is pure: `replay` takes the events and the
executor's records; the watchdog gathers both.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec
import nats
import nats.errors
import nats.js.api
from nats.aio.client import Client as NatsClient

from podherd.client import AuditStalled, audit_records
from podherd.errors import CliError
from shared.api import annotations as known
from shared.api.pmj import MODE_EVICT_DIRECTLY, PHASE_SUCCEEDED, TERMINAL_PHASES
from shared.config.model import NatsConfig, Tls, nats_servers
from shared.nats import bus
from shared.nats.access import Access
from shared.nats.bus import TRANSIENT

POD, RESERVATION, JOB = "Pod", "Reservation", "PodMigrationJob"


@dataclass(frozen=True)
class RoomCheck:
    """The executor's word, before an eviction, on the room it read."""

    job: str
    reservation: str
    resource_version: int
    node: str


@dataclass(frozen=True)
class _Room:
    phase: str
    node: str
    taken: bool


@dataclass
class _Job:
    mode: str
    pod_key: str
    pod_uid: str | None
    ended: bool = False
    succeeded: bool = False


@dataclass
class HistoryFindings:
    events: int = 0
    evictions_checked: int = 0
    evictions_without_room: list[str] = field(default_factory=list)
    succeeded_before_gone: list[str] = field(default_factory=list)


@dataclass
class History:
    """Events as they were watched; `replay` orders them."""

    events: list[tuple[int, str, str, dict[str, Any]]] = field(default_factory=list)

    def add(self, kind: str, event_type: str, obj: dict[str, Any]) -> None:
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if event_type in ("ADDED", "MODIFIED", "DELETED") and version and str(version).isdigit():
            self.events.append((int(version), kind, event_type, obj))

    def listed(self, kind: str, items: Iterable[dict[str, Any]]) -> None:
        for item in items:
            self.add(kind, "ADDED", item)


def replay(history: History, checks: Iterable[RoomCheck], default_mode: str) -> HistoryFindings:
    found = HistoryFindings(events=len(history.events))
    by_job: dict[str, list[RoomCheck]] = {}
    for check in checks:
        by_job.setdefault(check.job, []).append(check)
    rooms: dict[str, list[tuple[int, _Room]]] = {}  # every version of each Reservation, in order
    pods: dict[str, str] = {}  # namespace/name -> uid of the pod by that name now
    alive: dict[str, str] = {}  # uid -> node
    marked: set[str] = set()  # pods seen as eviction targets
    jobs: dict[str, _Job] = {}
    for version, kind, event_type, obj in sorted(history.events, key=lambda e: e[0]):
        meta = obj.get("metadata") or {}
        if kind == RESERVATION:
            status = obj.get("status") or {}
            room = _Room(
                status.get("phase") or "", status.get("nodeName") or "", bool(status.get("currentOwners"))
            )
            rooms.setdefault(meta.get("name") or "", []).append((version, room))
        elif kind == POD:
            uid, key = meta.get("uid") or "", f"{meta.get('namespace')}/{meta.get('name')}"
            if event_type == "DELETED":
                alive.pop(uid, None)
                continue
            node = (obj.get("spec") or {}).get("nodeName") or ""
            pods[key], alive[uid] = uid, node
            if uid not in marked and _evicted(obj):
                marked.add(uid)
                _held_against_rooms(
                    found,
                    uid,
                    key,
                    node=node,
                    version=version,
                    jobs=jobs,
                    by_job=by_job,
                    rooms=rooms,
                    default_mode=default_mode,
                )
        elif kind == JOB:
            _job_seen(found, obj, event_type, jobs=jobs, pods=pods, alive=alive, default_mode=default_mode)
    return found


def _evicted(pod: dict[str, Any]) -> bool:
    return any(
        c.get("type") == known.DISRUPTION_TARGET and c.get("reason") == known.EVICTION_BY_EVICTION_API
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _room_at(rooms: Mapping[str, list[tuple[int, _Room]]], name: str, version: int) -> _Room | None:
    """The Reservation as it was at `version`: its latest version not after it."""
    at = None
    for seen, room in rooms.get(name, []):
        if seen > version:
            break
        at = room
    return at


def _held_against_rooms(
    found: HistoryFindings,
    uid: str,
    key: str,
    *,
    node: str,
    version: int,
    jobs: Mapping[str, _Job],
    by_job: Mapping[str, list[RoomCheck]],
    rooms: Mapping[str, list[tuple[int, _Room]]],
    default_mode: str,
) -> None:
    for name, job in jobs.items():
        if job.ended or job.pod_uid != uid or job.mode == MODE_EVICT_DIRECTLY:
            continue
        found.evictions_checked += 1
        good = [
            c
            for c in by_job.get(name, [])
            if c.resource_version < version
            and (room := _room_at(rooms, c.reservation, c.resource_version)) is not None
            and room.phase == "Available"
            and not room.taken
            and room.node
            and room.node != node
        ]
        if not good:
            said = [f"{c.reservation}@{c.resource_version}" for c in by_job.get(name, [])] or ["no check"]
            found.evictions_without_room.append(
                f"{name}: {key} (uid {uid}) evicted at resourceVersion {version}; "
                f"room read: {', '.join(said)}"
            )


def _job_seen(
    found: HistoryFindings,
    obj: dict[str, Any],
    event_type: str,
    *,
    jobs: dict[str, _Job],
    pods: Mapping[str, str],
    alive: Mapping[str, str],
    default_mode: str,
) -> None:
    meta = obj.get("metadata") or {}
    name = meta.get("name") or ""
    if event_type == "DELETED":
        jobs.pop(name, None)
        return
    job = jobs.get(name)
    if job is None:
        spec = obj.get("spec") or {}
        ref = spec.get("podRef") or {}
        key = f"{ref.get('namespace')}/{ref.get('name')}"
        # The pod it was made for: the one its podRef names (by uid when given), as it was at its creation.
        job = jobs[name] = _Job(spec.get("mode") or default_mode, key, ref.get("uid") or pods.get(key))
    phase = (obj.get("status") or {}).get("phase")
    if phase == PHASE_SUCCEEDED and not job.succeeded:
        job.succeeded = True
        if job.pod_uid is not None and job.pod_uid in alive:
            version = meta.get("resourceVersion")
            found.succeeded_before_gone.append(
                f"{name}: Succeeded at resourceVersion {version} "
                f"while {job.pod_key} (uid {job.pod_uid}) exists"
            )
    job.ended = phase in TERMINAL_PHASES


async def room_checks(
    nats_url: str, subject_prefix: str, *, within: float = 60.0, tls: Tls | None = None
) -> list[RoomCheck]:
    """Every `room-checked` record on the audit stream of a deployment (subjects under `subject_prefix`),
    read again from the start while JetStream cannot answer or stops delivering midway (a leader election),
    for up to `within` seconds: a partial read would hold evictions against checks it never saw. `tls`: a
    reader's certificate (an auditor's) where NATS wants one."""
    nc = await nats.connect(nats_servers(nats_url), **Access(NatsConfig(url=nats_url, tls=tls)).options)
    deadline = time.monotonic() + within
    try:
        while True:
            try:
                return await _room_checks(nc, bus.Subjects(subject_prefix))
            except (AuditStalled, *TRANSIENT):
                if time.monotonic() > deadline:
                    raise
            await asyncio.sleep(0.5)  # an election takes seconds; nothing to wait on but the stream itself
    finally:
        await nc.close()


async def _room_checks(nc: NatsClient, subjects: bus.Subjects) -> list[RoomCheck]:
    out: list[RoomCheck] = []
    try:
        async for data in audit_records(nc, subjects, None, follow=False):
            record = msgspec.json.decode(data)
            details = record.get("details") or {}
            if record.get("action") == "room-checked" and str(details.get("resourceVersion")).isdigit():
                out.append(
                    RoomCheck(
                        job=record.get("job") or "",
                        reservation=details.get("reservation") or "",
                        resource_version=int(details["resourceVersion"]),
                        node=details.get("node") or "",
                    )
                )
    except AuditStalled:
        raise
    except CliError:
        return []  # no audit stream: nothing was ever checked
    return out
