"""What the watch events of one scenario show of each of its jobs, whichever controller ran it: its end, the
conditions in the order they were set, whether (and how long after its creation) its pod was evicted, what
became of its Reservation, and how many of the scenario's jobs were migrating at once per node, namespace
and workload."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from shared.kube.client import KubeClient
from tests.e2e.pipeline import GROUP, TERMINAL, VERSION

JOBS = f"/apis/{GROUP}/{VERSION}/podmigrationjobs"
RESERVATIONS = f"/apis/{GROUP}/{VERSION}/reservations"
# Where each condition falls in a migration's course. Koordinator sets those of one stage in whichever order
# its reconciles meet them (the last three came in three orders in as many runs), so the order compared is
# the stages', not the conditions' within one.
STAGES = {
    "ReservationCreated": 0,
    "ReservationScheduled": 1,
    "Preemption": 2,
    "Eviction": 3,
    "PodScheduled": 4,
    "PodBoundReservation": 4,
    "ReservationBound": 4,
    "BoundPodReady": 4,
}
SETTLE_WITHIN = 10.0  # seconds a Reservation is given, once its job ended, to be deleted or settle


@dataclass(frozen=True)
class Seen:
    at: float
    kind: str  # job, pod, reservation
    type: str  # ADDED, MODIFIED, DELETED
    obj: dict[str, Any]


@dataclass(frozen=True)
class JobTrace:
    outcome: tuple[str, str]  # (phase, reason)
    conditions: tuple[tuple[str, ...], ...]  # the types set True or False, stage by stage, in the order set
    evicted: bool
    evicted_after_s: float | None
    reservation: str  # what became of it: none, consumed, unused, left unused
    message: str = ""  # the job's last message (reported, not compared: each controller words its own)


@dataclass
class Recorder:
    """Watches a scenario's jobs (by name), the pods of its namespace and every Reservation, from before
    its jobs are made to after their ends."""

    kube: KubeClient
    namespace: str
    seen: list[Seen] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    async def start(self) -> None:
        pods = f"/api/v1/namespaces/{self.namespace}/pods"
        for kind, path in (("job", JOBS), ("pod", pods), ("reservation", RESERVATIONS)):
            listing = msgspec.json.decode(await self.kube.arequest("GET", path))
            for item in listing.get("items") or []:
                self.seen.append(Seen(time.monotonic(), kind, "ADDED", item))
            version = listing["metadata"]["resourceVersion"]
            self._tasks.append(asyncio.create_task(self._watch(kind, path, version)))

    async def _watch(self, kind: str, path: str, version: str) -> None:
        query = [("watch", "true"), ("resourceVersion", version)]
        async for line in self.kube.stream(path, query, read_timeout=600):
            event = msgspec.json.decode(line)
            if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                self.seen.append(Seen(time.monotonic(), kind, event["type"], event["object"]))
                self.changed.set()

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def until(self, done: Callable[[Recorder], bool], within: float) -> bool:
        """Until `done(self)` holds, each event awaited; False when `within` seconds passed first."""
        deadline = time.monotonic() + within
        while not done(self):
            self.changed.clear()
            try:
                async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                    await self.changed.wait()
            except TimeoutError:
                return done(self)
        return True

    def jobs(self, name: str) -> list[Seen]:
        return [s for s in self.seen if s.kind == "job" and s.obj["metadata"]["name"] == name]

    def ended(self, names: list[str]) -> bool:
        return all(self.phase(name) in TERMINAL for name in names)

    def phase(self, name: str) -> str:
        events = self.jobs(name)
        return ((events[-1].obj.get("status") or {}).get("phase") or "") if events else ""

    def reservation_of(self, name: str) -> str | None:
        for seen in reversed(self.jobs(name)):
            ref = ((seen.obj["spec"].get("reservationOptions") or {}).get("reservationRef") or {}).get("name")
            if ref:
                return str(ref)
        return None

    def reservation_fate(self, name: str) -> str:
        """What became of the job's Reservation: `consumed` (a pod took it: Succeeded), `unused` (deleted or
        Failed before any pod took it), `left unused` (still there, untaken), or `none`. Whether a consumed
        one is then deleted or left for the scheduler's collector is housekeeping, not its fate."""
        reservation = self.reservation_of(name)
        events = [
            s for s in self.seen if s.kind == "reservation" and s.obj["metadata"]["name"] == reservation
        ]
        if reservation is None or not events:
            return "none"
        phases = [str((s.obj.get("status") or {}).get("phase") or "Pending") for s in events]
        if "Succeeded" in phases:
            return "consumed"
        # Deleted or Failed untaken: which comes first when its expiry meets the job's ttl is a race.
        return "unused" if events[-1].type == "DELETED" or "Failed" in phases else "left unused"

    def settled(self, names: list[str]) -> bool:
        return all(self.reservation_fate(n) != "left unused" for n in names)

    def trace(self, name: str) -> JobTrace:
        events = self.jobs(name)
        status = (events[-1].obj.get("status") or {}) if events else {}
        conditions: list[str] = []
        for seen in events:  # a condition counts once it is True or False (Unknown: under way)
            for condition in (seen.obj.get("status") or {}).get("conditions") or []:
                if condition.get("status") in ("True", "False") and condition["type"] not in conditions:
                    conditions.append(condition["type"])
        created = events[0].at if events else 0.0
        evicted = self._evicted(events[0].obj["spec"]["podRef"]) if events else None
        return JobTrace(
            outcome=(status.get("phase") or "", status.get("reason") or ""),
            conditions=staged(conditions),
            evicted=evicted is not None,
            evicted_after_s=None if evicted is None else round(max(0.0, evicted - created), 1),
            reservation=self.reservation_fate(name),
            message=str(status.get("message") or ""),
        )

    def _evicted(self, ref: dict[str, Any]) -> float | None:
        """When the pod `ref` names was first marked for deletion, or went (its uid, not its name: a
        StatefulSet's replacement comes back under it)."""
        uid = None
        for seen in self.seen:
            meta = seen.obj["metadata"]
            if seen.kind != "pod" or meta["name"] != ref.get("name"):
                continue
            uid = uid or meta.get("uid")
            if meta.get("uid") == uid and (seen.type == "DELETED" or meta.get("deletionTimestamp")):
                return seen.at
        return None

    def concurrency(self, names: list[str], key: Any) -> dict[str, int]:
        """The most of `names` migrating (Running) at once, per `key(pod)` of each job's pod."""
        pods: dict[str, dict[str, Any]] = {}
        for seen in self.seen:  # the first pod of each name: the one the job was made for
            if seen.kind == "pod":
                pods.setdefault(seen.obj["metadata"]["name"], seen.obj)
        spans: list[tuple[float, float, str]] = []
        for name in names:
            events = self.jobs(name)
            began = next((s.at for s in events if _phase(s) == "Running"), None)
            if began is None or not events:
                continue
            over = next((s.at for s in events if _phase(s) in TERMINAL), float("inf"))
            pod = pods.get(events[0].obj["spec"]["podRef"].get("name", ""))
            if pod is not None:
                spans.append((began, over, str(key(pod))))
        most: dict[str, int] = {}
        for began, _, group in spans:
            at_once = sum(1 for b, o, g in spans if g == group and b <= began < o)
            most[group] = max(most.get(group, 0), at_once)
        return most


def staged(conditions: list[str]) -> tuple[tuple[str, ...], ...]:
    """`conditions` (in the order set) as their stages, each stage's set sorted; a condition set out of its
    stage's order starts a stage of its own, so an order that differs across stages still shows."""
    stages: list[list[str]] = []
    for condition in conditions:
        stage = STAGES.get(condition, -1)
        if stages and STAGES.get(stages[-1][0], -1) == stage:
            stages[-1].append(condition)
        else:
            stages.append([condition])
    return tuple(tuple(sorted(group)) for group in stages)


def _phase(seen: Seen) -> str:
    return str((seen.obj.get("status") or {}).get("phase") or "")


def node_of(pod: dict[str, Any]) -> str:
    return str(pod["spec"].get("nodeName") or "")


def workload_of(pod: dict[str, Any]) -> str:
    owners = pod["metadata"].get("ownerReferences") or [{}]
    return str(owners[0].get("name") or "")


def namespace_of(pod: dict[str, Any]) -> str:
    return str(pod["metadata"]["namespace"])
