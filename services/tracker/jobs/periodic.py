"""The tracker's clock: jobs past their deadline are reconciled (and time out) though nothing else happens
to them; what Redis may have lost is found again from the cluster (open jobs, room kept for ended ones);
the jobs-by-phase gauge is kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import cast

import redis.asyncio as aioredis
from prometheus_client import Gauge

from services.tracker.jobs.effects import Effects
from services.tracker.jobs.observer import Observer
from services.tracker.jobs.state import JobState
from services.tracker.keys import TrackerKeys
from shared.api import paths
from shared.api.meta import ObjectMeta
from shared.api.names import LABEL_CONTROLLER, LABEL_CREATED_BY, LABEL_JOB
from shared.api.pmj import PHASE_PENDING, TERMINAL_PHASES, PodMigrationJob
from shared.api.pmj_read import read_pmj
from shared.api.reservation import is_untaken_room
from shared.core.backoff import Backoff
from shared.core.waits import wait_event
from shared.kube.client import KubeClient, unanswered
from shared.ledger.scripts import as_text
from shared.nats.consume import Retry, read_or_retry
from shared.redis import client as redis_client

log = logging.getLogger("services.tracker")
JOBS_BY_PHASE = Gauge("podherd_jobs", "PodMigrationJobs by phase", ["phase"])
PHASES = ("Pending", "Running", "Succeeded", "Failed", "Aborted")
RESYNC_SECONDS = 30.0
# How often a replica looks for room an ended job kept after Redis lost why (see `sweep_room`).
ROOM_SWEEP_SECONDS = 10.0


class Periodic:
    def __init__(
        self,
        client: aioredis.Redis,
        keys: TrackerKeys,
        kube: KubeClient,
        *,
        reconcile: Callable[[str], Awaitable[None]],
        observer: Observer,
        state: JobState,
        effects: Effects,
        redis_address: str = "redis",
    ) -> None:
        self.client, self.keys, self.kube, self.reconcile = client, keys, kube, reconcile
        self.observer, self.state, self.effects = observer, state, effects
        self.redis_down = Backoff("Redis", redis_address)
        self.api_down = Backoff("the Kubernetes API server", kube.api.configuration.host)

    async def deadlines(self, stop: asyncio.Event) -> None:
        """Jobs whose ttl has passed are reconciled (and time out) even if nothing else happens to them;
        beside them, the periodic resync and room sweep."""
        periodic = [(RESYNC_SECONDS, self.resync), (ROOM_SWEEP_SECONDS, self.sweep_room)]
        last = [time.monotonic()] * len(periodic)
        while not stop.is_set():
            await wait_event(stop, 0.5)
            try:
                for i, (every, task) in enumerate(periodic):
                    if time.monotonic() - last[i] >= every:
                        last[i] = time.monotonic()
                        await self._logged(task)
                due = await self.client.zrangebyscore(self.keys.deadlines, "-inf", time.time())
                for name in cast(list[bytes], due):  # members only: no scores asked for
                    with contextlib.suppress(Retry):
                        await self.reconcile(as_text(name))
            except Exception as exc:  # an outage is not a bug: one line, then a backoff
                down = self._outage_of(exc)
                if down is None:
                    log.exception("deadline sweep failed")
                elif not await down.pause(stop, exc):
                    return
                else:
                    continue
            self.redis_down.answered()
            self.api_down.answered()

    def _outage_of(self, exc: BaseException) -> Backoff | None:
        """The dependency that did not answer (the API server's client errors are OSErrors too)."""
        if unanswered(exc):
            return self.api_down
        return self.redis_down if isinstance(exc, redis_client.OUTAGE) else None

    @staticmethod
    async def _logged(task: Callable[[], Awaitable[None]]) -> None:
        """A periodic task; its failure said once, with the traceback of the bug it is, unless an outage."""
        try:
            await task()
        except Exception as exc:
            if unanswered(exc) or isinstance(exc, redis_client.OUTAGE):
                raise
            log.exception("%s failed", task.__name__)

    async def report_phases(self, stop: asyncio.Event, every: float = 5.0) -> None:
        """`podherd_jobs{phase}` from the phases the trackers wrote (every replica reports the same count)."""
        while not stop.is_set():
            try:
                written = [as_text(p) for p in await self.client.hvals(self.keys.phases)]
            except Exception as exc:
                log.debug("job phases unavailable: %s", exc)
            else:
                for phase in PHASES:
                    JOBS_BY_PHASE.labels(phase).set(written.count(phase))
            await wait_event(stop, every)

    async def resync(self) -> None:
        """Redis can lose what drives a job (a flush: its deadline, its decision): every open job whose
        deadline is not tracked is tracked again and reconciled, so none waits for an event that will not
        come. Costs one list of the PMJs and one Redis round trip per RESYNC_SECONDS."""
        items = await read_or_retry(self.kube.list_items(paths.JOBS, ""), "listing jobs", 0.5)
        listed = [
            r for r in items if ((r.get("status") or {}).get("phase") or PHASE_PENDING) not in TERMINAL_PHASES
        ]
        names = [raw["metadata"]["name"] for raw in listed]
        for raw, name in zip(listed, await self._lost(names), strict=True):
            if not name:
                continue
            try:
                await self.state.track(read_pmj(raw)[0])  # one that cannot run is ended by its reconcile
                with contextlib.suppress(Retry):
                    await self.reconcile(name)
            except Exception:  # a bug: said once for this job, and the jobs after it are still resynced
                log.exception("resync of job %s failed", name)

    async def _lost(self, names: list[str]) -> list[str]:
        """Of jobs listed open, those Redis tracks no deadline for ("" for the others), in one round trip. A
        job a tracker wrote an ending for since the list (its deadline untracked with it) is not lost: it
        ended, and reconciling it again would only read it."""
        if not names:
            return []
        pipe = self.client.pipeline(transaction=False)
        for name in names:
            pipe.zscore(self.keys.deadlines, name)
        pipe.hmget(self.keys.phases, names)
        *deadlines, phases = await pipe.execute()
        return [
            name if deadline is None and not (phase is not None and as_text(phase) in TERMINAL_PHASES) else ""
            for name, deadline, phase in zip(names, deadlines, phases, strict=True)
        ]

    async def sweep_room(self) -> None:
        """Room an ended job kept for its siblings is deleted by the last of them to end, as Redis records;
        Redis can lose that record (a flush). From the cluster alone: a Reservation Podherd made for a job
        that has ended goes, unless it is untaken room of a workload with a job still in flight."""
        items = await self.observer.list(paths.RESERVATIONS, f"{LABEL_CREATED_BY}=podherd")
        owners = sorted({(r["metadata"].get("labels") or {}).get(LABEL_JOB) or "" for r in items} - {""})
        # The phases the trackers wrote; a job Redis does not know (a flush) is read from the API server.
        written = await self.client.hmget(self.keys.phases, owners) if owners else []
        open_jobs = set()
        for owner, recorded in zip(owners, written, strict=True):
            phase = as_text(recorded) if recorded is not None else None
            if phase is None and (found := await self.observer.get(paths.job(owner))) is not None:
                phase = (found.get("status") or {}).get("phase") or PHASE_PENDING
            if phase is not None and phase not in TERMINAL_PHASES:  # None: the job is gone
                open_jobs.add(owner)
        labels = [r["metadata"].get("labels") or {} for r in items]
        busy = {lab.get(LABEL_CONTROLLER) for lab in labels if lab.get(LABEL_JOB) in open_jobs}
        for r, lab in zip(items, labels, strict=True):
            owner = lab.get(LABEL_JOB) or ""
            if not owner or owner in open_jobs or (is_untaken_room(r) and lab.get(LABEL_CONTROLLER) in busy):
                continue
            gone = PodMigrationJob(metadata=ObjectMeta(name=owner, uid=f"swept-{r['metadata'].get('uid')}"))
            await self.effects.command(gone, "cleanup", None, seen=f"{r['metadata'].get('resourceVersion')}")
