"""The tracker: drives every job from the events that concern it and writes its story into the PMJ status.

Triggers (all event-driven): the job's own events, its pod's and Reservation's events, the replacement
pod's (it carries the Reservation's name, which is the job's), the arbitrator's decisions, the executor's
reports, and the job's deadline (`spec.ttl`, default `defaultJobTTL`). On any of them the job is
reconciled: its live objects are read, `progress.progress` decides the next status and actions, the status
is written with optimistic concurrency (a 409 re-reads and decides again), commands go to the executor,
and an ended job's ledger slots are released exactly once. A per-job lock in Redis makes one replica at a
time handle a job; a message for a job another replica holds is redelivered a moment later.

Every status change is an audit record (`p.audit.<job>`, action `transition`) and a Kubernetes Event on the
PMJ. Intents from external systems are turned into jobs here too (`intake.py`).

Abort a job with the annotation `podherd.io/abort` (any value, e.g. the reason): it ends Aborted, what it
created is cleaned up, and nothing is evicted afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, cast

import msgspec
import redis.asyncio as aioredis
from nats.aio.msg import Msg
from prometheus_client import Gauge

from services.tracker import claims
from services.tracker import progress as machine
from services.tracker.claims import Ident
from services.tracker.collector import Collector
from services.tracker.effects import CommandStep, Effects
from services.tracker.intake import IntentIntake
from services.tracker.keys import TrackerKeys
from services.tracker.observe import JobEvent, LabelledEvent, node_ready, pod_view, reservation_view
from services.tracker.progress import PodView, ReservationView
from services.tracker.state import JobState
from shared import bus, ledger
from shared.api import annotations as known
from shared.api import codec, paths
from shared.api.messages import (
    Decision,
    EventHead,
    JobRef,
    ObjectEvent,
    PodInfo,
    Report,
)
from shared.api.meta import ObjectMeta
from shared.api.pmj import (
    PHASE_FAILED,
    PHASE_PENDING,
    PHASE_RUNNING,
    PHASE_SUCCEEDED,
    REASON_WAIT_FOR_POD_BIND_RESERVATION,
    TERMINAL_PHASES,
    Phase,
    PodMigrationJob,
)
from shared.api.reservation import (
    LABEL_ATTEMPT,
    LABEL_CONTROLLER,
    LABEL_CREATED_BY,
    LABEL_JOB,
    is_untaken_room,
    made_for,
)
from shared.config import PodherdConfig
from shared.consume import Retry, durable, one_by_one, read_or_retry, run_consumer
from shared.durations import parse_duration
from shared.kube import KubeClient, KubeError
from shared.ledger import Ledger, as_text, lua_script
from shared.logs import about_job
from shared.ops import OpsServer
from shared.runtime import close_nats, nats_check
from shared.stats import MigrationStats
from shared.waits import wait_event

log = logging.getLogger(__name__)
JOBS_BY_PHASE = Gauge("podherd_jobs", "PodMigrationJobs by phase", ["phase"])
PHASES = ("Pending", "Running", "Succeeded", "Failed", "Aborted")
RESYNC_SECONDS = 30.0
# How often a replica looks for room an ended job kept after Redis lost why (see `sweep_room`).
ROOM_SWEEP_SECONDS = 10.0
LOCK_MS = 15_000
UNLOCK = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"


class Tracker:
    def __init__(self, config: PodherdConfig, nc: Any, client: aioredis.Redis, kube: KubeClient) -> None:
        self.config = config
        self.args = config.migration_controller
        self.nc = nc
        self.js = nc.jetstream()
        self.client = client
        self.kube = kube
        self.subjects = bus.Subjects(config.nats.subject_prefix)
        self.publisher = bus.Publisher(nc)
        self.ledger = Ledger(client, config.redis.key_prefix, parse_duration(config.arbitrator.slot_ttl))
        self.keys = TrackerKeys(config.redis.key_prefix)
        self.stats = MigrationStats(client, config.redis.key_prefix)
        self.me = f"{config.replica}-{uuid.uuid4().hex[:8]}"
        self._unlock = client.register_script(UNLOCK)
        self._room_ends = client.register_script(lua_script("room.lua"))
        self.state = JobState(client, self.keys, self.args.default_job_ttl)
        self.effects = Effects(config, nc, kube, self.publisher, self.subjects)
        self.intake = IntentIntake(kube, self.publisher, self.subjects, config.replica)
        self.collector = Collector(config, client, kube, self.publisher, self.js)

    async def run(self, stop: asyncio.Event) -> None:
        await bus.ensure_events_stream(self.js, self.subjects, self.config.nats)
        await bus.ensure_work_streams(self.js, self.subjects, self.config.nats)
        kinds = ("pods", "podmigrationjobs", "reservations")
        events = await durable(
            self.js,
            self.subjects.events_stream,
            "tracker",
            [self.subjects.events_of(k) for k in kinds],
            self.config.nats,
            max_deliver=-1,
        )
        steps = ("admitted", "rejected", "report", "kick")
        decisions = await durable(
            self.js,
            self.subjects.jobs_stream,
            "tracker-jobs",
            [self.subjects.jobs_at(s) for s in steps],
            self.config.nats,
            max_deliver=-1,
        )
        # One part failing takes the others down: the process exits and is restarted whole.
        async with asyncio.TaskGroup() as group:
            group.create_task(
                run_consumer(events, self.js, self.subjects, "tracker", one_by_one(self.on_event), stop)
            )
            group.create_task(
                run_consumer(
                    decisions, self.js, self.subjects, "tracker-jobs", one_by_one(self.on_job_message), stop
                )
            )
            group.create_task(self.intake.serve(self.nc, self.config.nats, stop))
            group.create_task(self.deadlines(stop))
            group.create_task(self.collector.run(stop))
            group.create_task(self.report_phases(stop))

    # ----------------------------------------------------------------------------------------------------
    # Triggers

    async def on_event(self, msg: Msg) -> None:
        head = codec.decode(msg.data, EventHead)
        if head.kind == "PodMigrationJob":
            if head.type == "DELETED":
                await self.forget(codec.decode(msg.data, JobEvent).object)
            else:
                await self.reconcile(head.name)
        elif head.kind == "Reservation":
            labels = codec.decode(msg.data, LabelledEvent).object.metadata.labels or {}
            await self._kick_waiting(labels.get(LABEL_CONTROLLER))
            # One Podherd made (labelled with its job), or one a job names (it expires, it is taken, ...).
            owner = labels.get(LABEL_JOB) or as_text(
                await self.client.hget(self.keys.named, head.name) or b""
            )
            if owner:
                await self.reconcile(owner)
        elif head.kind == "Pod":
            pod = codec.decode(msg.data, ObjectEvent[PodInfo]).object
            controller = pod.owner.uid if pod.owner else None
            if controller and known.RESERVATION_ALLOCATED in pod.annotations:
                # A pod in reserved room: the replacement some job of its workload stands for. Once it is
                # gone, so is its claim: no job can take it for its replacement any more.
                entry = json.dumps([pod.namespace, pod.name, pod.uid])
                if head.type == "DELETED":
                    pipe = self.client.pipeline(transaction=False)
                    pipe.srem(self.keys.pool(controller), entry)
                    pipe.hdel(self.keys.claims, pod.uid)
                    await pipe.execute()
                else:
                    await self.client.sadd(self.keys.pool(controller), entry)
            await self._kick_waiting(controller)
            key = f"{head.namespace}/{head.name}"
            pipe = self.client.pipeline(transaction=False)
            pipe.hget(self.keys.pod_jobs, key)
            # The job that claimed this pod as its replacement waits for it to be Ready.
            pipe.hget(self.keys.replacement_jobs, key)
            job, claimant = await pipe.execute()  # one round trip per pod event
            if job is not None:
                await self.reconcile(as_text(job))
            if claimant is not None and claimant != job:
                await self.reconcile(as_text(claimant))

    async def on_job_message(self, msg: Msg) -> None:
        step = self.subjects.step_of(msg.subject)
        if step == "kick":
            await self.reconcile(codec.decode(msg.data, JobRef).name)
        elif step == "report":
            report = codec.decode(msg.data, Report)
            await self.client.hset(self.keys.reports(report.job.uid), report.step, codec.encode(report))
            await self.reconcile(report.job.name)
        else:
            decision = codec.decode(msg.data, Decision)
            await self.client.hset(self.keys.decisions, decision.job.uid, codec.encode(decision))
            await self.reconcile(decision.job.name)

    async def deadlines(self, stop: asyncio.Event) -> None:
        """Jobs whose ttl has passed are reconciled (and time out) even if nothing else happens to them;
        beside them, the periodic resync and room sweep."""
        periodic = [(RESYNC_SECONDS, self.resync), (ROOM_SWEEP_SECONDS, self.sweep_room)]
        last = [time.monotonic()] * len(periodic)
        while not stop.is_set():
            await wait_event(stop, 0.5)
            for i, (every, task) in enumerate(periodic):
                if time.monotonic() - last[i] >= every:
                    last[i] = time.monotonic()
                    try:
                        await task()
                    except Exception:
                        log.exception("%s failed", task.__name__)
            try:
                due = await self.client.zrangebyscore(self.keys.deadlines, "-inf", time.time())
                for name in cast(list[bytes], due):  # members only: no scores asked for
                    with contextlib.suppress(Retry):
                        await self.reconcile(as_text(name))
            except Exception:
                log.exception("deadline sweep failed")

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
        come. Costs one list of the PMJs per RESYNC_SECONDS."""
        items = await read_or_retry(self.kube.list_items(paths.JOBS, ""), "listing jobs", 0.5)
        for raw in items:
            if ((raw.get("status") or {}).get("phase") or PHASE_PENDING) in TERMINAL_PHASES:
                continue
            name = raw["metadata"]["name"]
            if await self.client.zscore(self.keys.deadlines, name) is None:
                await self.state.track(msgspec.convert(raw, PodMigrationJob))
                with contextlib.suppress(Retry):
                    await self.reconcile(name)

    async def sweep_room(self) -> None:
        """Room an ended job kept for its siblings is deleted by the last of them to end, as Redis records;
        Redis can lose that record (a flush). From the cluster alone: a Reservation Podherd made for a job
        that has ended goes, unless it is untaken room of a workload with a job still in flight."""
        items = await self._list(paths.RESERVATIONS, f"{LABEL_CREATED_BY}=podherd")
        owners = sorted({(r["metadata"].get("labels") or {}).get(LABEL_JOB) or "" for r in items} - {""})
        # The phases the trackers wrote; a job Redis does not know (a flush) is read from the API server.
        written = await self.client.hmget(self.keys.phases, owners) if owners else []
        open_jobs = set()
        for owner, recorded in zip(owners, written, strict=True):
            phase = as_text(recorded) if recorded is not None else None
            if phase is None and (found := await self._get(paths.job(owner))) is not None:
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

    async def forget(self, job: PodMigrationJob) -> None:
        """The PMJ was deleted: whatever it held goes (its Reservation, its ledger slots)."""
        uid = job.metadata.uid or ""
        await self._cleanup(job, None)
        await self.client.hdel(self.keys.workload_uid_of, job.metadata.name or "")
        if await self.ledger.release(uid):
            await self.effects.released(uid)
        await self.state.untrack(job)
        pipe = self.client.pipeline(transaction=False)  # what the tracker kept for it, to the last field
        pipe.hdel(self.keys.phases, job.metadata.name or "")
        for per_job in (self.keys.decisions, self.keys.pod_uids, self.keys.replacement):
            pipe.hdel(per_job, uid)
        pipe.delete(self.keys.reports(uid))
        await pipe.execute()

    # ----------------------------------------------------------------------------------------------------
    # Reconciling one job

    async def reconcile(self, name: str) -> None:
        with about_job(name):
            await self._reconcile(name)

    async def _reconcile(self, name: str) -> None:
        lock = self.keys.lock(name)
        if not await self.client.set(lock, self.me, nx=True, px=LOCK_MS):
            raise Retry(f"job {name} is being handled by another replica", 0.2)
        try:
            for _ in range(8):
                if await self._reconcile_once(name):
                    return
            raise Retry(f"job {name}: the status kept changing under us", 0.5)
        finally:
            await self._unlock(keys=[lock], args=[self.me])

    async def _reconcile_once(self, name: str) -> bool:
        raw = await self._get(paths.job(name))
        if raw is None:
            return True
        job = msgspec.convert(raw, PodMigrationJob)
        observed = await self._observe(job)
        step = machine.progress(observed)
        before = job.status
        if step.status != before:
            body = {**raw, "status": msgspec.to_builtins(step.status)}
            try:
                await self.kube.arequest("PUT", paths.job_status(name), body=body)
            except KubeError as exc:
                if exc.status == 409:
                    return False  # changed meanwhile: read it again and decide again
                if exc.status == 404:
                    return True
                raise
            await self._transitioned(job, before.phase if before else None, step)
        phase = step.status.phase or PHASE_PENDING
        if phase == PHASE_RUNNING and ledger.ANNOTATION not in (job.metadata.annotations or {}):
            await self._record_ledger(job)
        pod_uid = observed.pod.uid if observed.pod else None
        workload = observed.reservation.owner_controller_uid if observed.reservation else None
        for action in step.actions:
            if action == machine.EVICT and workload:
                await self.state.in_flight(name, workload)
            if action in (machine.RESERVE, machine.EVICT):
                await self.effects.command(job, cast(CommandStep, action), pod_uid, step.attempt)
            elif action == machine.CLEANUP:
                await self._cleanup(job, workload, observed.reservation)
            elif action == machine.RELEASE:
                if machine.CLEANUP not in step.actions and await self.state.was_in_flight(name):
                    await self._cleanup(job, None)  # its Reservation is gone, yet it must leave the set
                await self._release(job, phase)
        current = observed.reservation
        if (
            phase == PHASE_RUNNING
            and current
            and current.ours
            and current.name != job.spec.reservation_ref_name
        ):
            await self.effects.point_at(job, current)  # after the commands: the migration does not wait
        if phase in TERMINAL_PHASES:
            await self.state.untrack(job)
        else:
            await self.state.track(job)
        controller = observed.reservation.owner_controller_uid if observed.reservation else None
        if controller:
            waiting = self.keys.waiting(controller)
            if phase == PHASE_RUNNING and step.status.reason == REASON_WAIT_FOR_POD_BIND_RESERVATION:
                if await self.client.sadd(waiting, name):
                    # Registered after looking: a replacement that bound in between kicked no one. Look
                    # once more, now that every later bind kicks this job.
                    return False
            else:
                await self.client.srem(waiting, name)
        return True

    async def _kick_waiting(self, controller: str | None) -> None:
        """Something changed in a workload's Reservations or pods: look again at its jobs waiting for a
        replacement (through the jobs stream, so a job another replica holds is retried, not skipped)."""
        if not controller:
            return
        for member in await self.client.smembers(self.keys.waiting(controller)):
            name = as_text(member)
            ref = JobRef(name=name, uid="")
            await self.publisher.publish(
                self.subjects.job("kick", name), msgspec.json.encode(ref), uuid.uuid4().hex
            )
        await self.publisher.flush()

    async def _observe(self, job: PodMigrationJob) -> machine.Observed:
        uid = job.metadata.uid or ""
        ref = job.spec.pod_ref
        pipe = self.client.pipeline(transaction=False)
        pipe.hget(self.keys.decisions, uid)
        pipe.hgetall(self.keys.reports(uid))
        pipe.hexists(self.keys.workload_uid_of, job.metadata.name or "")  # an eviction was sent
        raw_decision, raw_reports, evicting = await pipe.execute()
        decision = codec.decode(raw_decision, Decision) if raw_decision else None
        reports = {as_text(k): codec.decode(v, Report) for k, v in raw_reports.items()}
        # The Reservations first, the pod after: a pod still there when read after its Reservation was seen
        # taken has not been evicted, so whoever took the room is not its replacement (read the other way
        # round, an eviction and the rebinding in between would look like a sibling taking it).
        reservations, attempt = await self._reservations(job)
        pod = None
        if ref is not None and ref.namespace and ref.name:
            found = await self._get(paths.pod(ref.namespace, ref.name))
            if found is not None:
                view = pod_view(found)
                # The pod the job was made for: a new pod by the same name (a StatefulSet's) is not it.
                # In one transaction: a Redis restart between the write and the read must not read back
                # nothing and take the job's own pod for another (and its job for Succeeded).
                pipe = self.client.pipeline(transaction=True)
                pipe.hsetnx(self.keys.pod_uids, uid, ref.uid or view.uid)
                pipe.hget(self.keys.pod_uids, uid)
                _, first_seen = await pipe.execute()
                expected = as_text(first_seen) if first_seen is not None else ref.uid or view.uid
                pod = view if view.uid == expected else None
                if pod is not None and pod.deleted_at is not None and pod.node:
                    node = await self._get(paths.node(pod.node))  # why it may not go: NotReady
                    pod = replace(pod, node_ready=node_ready(node) if node is not None else None)
        current = reservations[-1] if reservations else None
        await self._pool(reservations)
        bound_pod = None
        if current is not None and current.bound:
            bound_pod = await self._pod(current.bound[0])
        started = any(c.type == "Eviction" for c in (job.status.conditions if job.status else None) or [])
        claimed = None
        if started and (pod is None or pod.terminating) and current is not None:
            claimed = await self._claim(job, reservations)
        replacement = await self._pod(claimed) if claimed else None
        evict_report = reports.get("evict")
        reserve_report = reports.get("reserve")
        return machine.Observed(
            job=job,
            now=datetime.now(UTC),
            # A Running job was admitted: its PMJ says so even when Redis lost the decision (a flush).
            admitted=(decision is not None and decision.decision == "admitted")
            or (job.status is not None and job.status.phase == PHASE_RUNNING),
            rejection=(decision.reason or PHASE_FAILED, decision.message)
            if decision is not None and decision.decision == "rejected"
            else None,
            pod=pod,
            reservation=current,
            bound_pod=bound_pod,
            replacement=replacement,
            claimed=claimed,
            attempt=attempt,
            eviction_note=evict_report.message
            if evict_report and evict_report.outcome == "blocked"
            else None,
            # Sent, and not refused or done yet: the executor may have found the room and be evicting.
            eviction_sent=bool(evicting) and (evict_report is None or evict_report.outcome == "checked"),
            reserve_failed=reserve_report.message
            if reserve_report and reserve_report.outcome == "failed" and not current
            else None,
            default_mode=self.args.default_job_mode,
            default_ttl=self.args.default_job_ttl,
            dry_run=self.args.dry_run,
        )

    async def _reservations(self, job: PodMigrationJob) -> tuple[list[ReservationView], int]:
        """The job's Reservations, oldest attempt first, and the current attempt (0: none yet): the one the
        user named, else those Podherd made for it (its reservationRef then names the latest)."""
        name, ref = job.metadata.name or "", job.spec.reservation_ref_name
        if named := job.user_reservation:
            found = await self._get(paths.reservation(named))
            return ([reservation_view(found)], 1) if found is not None else ([], 0)
        items = await self._list(paths.RESERVATIONS, f"{LABEL_JOB}={name}")
        if ref is not None and not items and job.phase not in TERMINAL_PHASES:
            # Named as Podherd names them, yet none of Podherd's is there: a Reservation of the user's?
            found = await self._get(paths.reservation(ref))
            if found is not None and not made_for(found, name):
                return [reservation_view(found)], 1
        items.sort(key=lambda r: int(((r.get("metadata") or {}).get("labels") or {}).get(LABEL_ATTEMPT) or 1))
        attempt = int((items[-1]["metadata"].get("labels") or {}).get(LABEL_ATTEMPT) or 1) if items else 0
        return [reservation_view(r) for r in items], attempt

    async def _claim(self, job: PodMigrationJob, own: list[ReservationView]) -> tuple[str, str, str] | None:
        """The replacement this job stands for, once its pod is evicted: one pod that took a Reservation of
        the workload, claimed by one job only (Reservations are per workload, so a replacement may have
        taken another job's room, and that job then reserves again)."""
        uid = job.metadata.uid or ""
        mine = await self.client.hget(self.keys.replacement, uid)
        if mine is not None:
            namespace, name, pod_uid = json.loads(mine)
            return namespace, name, pod_uid
        controller = own[-1].owner_controller_uid
        pool = self.keys.pool(controller or "")
        pooled: list[Ident] = []
        workload: list[ReservationView] = []
        if controller:
            pooled = [tuple(json.loads(member)) for member in await self.client.smembers(pool)]
            listed = await self._list(paths.RESERVATIONS, f"{LABEL_CONTROLLER}={controller}")
            workload = [reservation_view(item) for item in listed]
        for namespace, name, pod_uid in claims.candidates(own, pooled, workload):
            raw = await self.client.hget(self.keys.claims, pod_uid)
            holder = as_text(raw) if raw is not None else None
            view = None if holder not in (None, uid) else await self._pod((namespace, name, pod_uid))
            if view is None or not claims.may_claim(uid, holder, controller, view.controller_uid):
                await self.client.srem(pool, json.dumps([namespace, name, pod_uid]))  # taken, gone, not ours
                continue
            if holder is not None or await self.client.hsetnx(self.keys.claims, pod_uid, uid):
                entry = json.dumps([namespace, name, pod_uid])
                pipe = self.client.pipeline(transaction=False)
                pipe.hset(self.keys.replacement, uid, entry)
                # Before the caller reads the replacement: its readiness, from now on, reconciles this job.
                pipe.hset(self.keys.replacement_jobs, f"{namespace}/{name}", job.metadata.name or "")
                pipe.srem(pool, entry)
                await pipe.execute()
                return namespace, name, pod_uid
        return None

    async def _pool(self, reservations: list[ReservationView]) -> None:
        """Remember every replacement seen in a Reservation of the workload until a job claims it: the
        Reservation may be cleaned up (its job ended) before the job that replacement stands for looks."""
        pipe = self.client.pipeline(transaction=False)
        for r in reservations:
            for bound in r.bound:
                if r.owner_controller_uid:
                    pipe.sadd(self.keys.pool(r.owner_controller_uid), json.dumps(list(bound)))
        if pipe:
            await pipe.execute()

    async def _pod(self, ident: tuple[str, str, str]) -> PodView | None:
        namespace, name, uid = ident
        found = await self._get(paths.pod(namespace, name))
        view = pod_view(found) if found is not None else None
        return view if view is not None and view.uid == uid else None

    async def _list(self, path: str, selector: str) -> list[dict[str, Any]]:
        return await read_or_retry(self.kube.list_items(path, selector), f"listing {path}", 0.5)

    # ----------------------------------------------------------------------------------------------------
    # Effects

    async def _cleanup(
        self, job: PodMigrationJob, workload: str | None, room: ReservationView | None = None
    ) -> None:
        """Ask the executor to delete the job's Reservations. A replacement of the workload may take any
        job's room, so room a job did not use is kept while a sibling is in flight; the last job of the
        workload to end takes the kept room with it (room.lua). Kept room that a replacement takes later
        is asked for again (the command names the room's state, so it is not a duplicate of the first)."""
        name = job.metadata.name or ""
        seen = f"{room.name}:{room.phase}:{len(room.bound)}" if room is not None else ""
        workload = workload or as_text(await self.client.hget(self.keys.workload_uid_of, name) or b"")
        if not workload:
            await self.effects.command(job, "cleanup", None, seen=seen)
            return
        keys = [self.keys.in_flight(workload), self.keys.room_kept(workload)]
        answer = await self._room_ends(keys=keys, args=[name])
        code, kept = int(answer[0]), [as_text(v) for v in answer[1:]]
        if code == 0:
            await self.effects.command(job, "cleanup", None, seen=seen, keep_untaken=True)
        elif code == 1 and kept:
            await self.effects.command(job, "cleanup", None, seen=seen, also=sorted(kept))
        else:
            await self.effects.command(job, "cleanup", None, seen=seen)

    async def _release(self, job: PodMigrationJob, phase: str) -> None:
        uid = job.metadata.uid or ""
        if not await self.ledger.release(uid):
            return
        ref = job.spec.pod_ref
        if phase == PHASE_FAILED and ref is not None:
            await self.stats.pod_failed(ref.namespace or "", ref.name or "")
        # The workload whose slot the job held, as its PMJ recorded it when it started running.
        held = ledger.recorded(uid, job.metadata.annotations or {})
        if phase == PHASE_SUCCEEDED and held is not None and held.workload is not None:
            await self.stats.workload_migrated(held.workload)
        # Last: whoever hears of the release (the arbitrator's next pass) reads the statistics it updated.
        await self.effects.released(uid)

    async def _record_ledger(self, job: PodMigrationJob) -> None:
        """What the job holds in the ledger, on the PMJ: the ledger is rebuilt from it after a Redis loss."""
        held = await self.ledger.held(job.metadata.uid or "")
        if held is None:
            return
        await self.effects.patch_job(
            job, {"metadata": {"annotations": {ledger.ANNOTATION: held.annotation()}}}
        )

    async def _transitioned(self, job: PodMigrationJob, previous: Phase | None, step: machine.Step) -> None:
        await self.effects.transitioned(job, previous, step)
        await self.state.phase_written(job.metadata.name or "", step.status.phase or PHASE_PENDING)

    async def _get(self, path: str) -> dict[str, Any] | None:
        return await read_or_retry(self.kube.get_json(path), f"reading {path}", 0.5)


async def main(config: PodherdConfig, stop: asyncio.Event, ops: OpsServer) -> None:
    nc = await bus.connect(config.nats, name=f"podherd-tracker-{config.replica}")
    client = aioredis.from_url(config.redis.url)
    kube = KubeClient.from_config(config.kubernetes)
    ops.add_check("nats", nats_check(nc))
    tracker = Tracker(config, nc, client, kube)

    async def answering() -> str | None:  # ready means a request for a migration finds this replica
        return None if tracker.intake.answering.is_set() else "not answering intents yet"

    ops.add_check("intents", answering)
    try:
        await tracker.run(stop)
    finally:
        await close_nats(nc)
        await client.aclose()
        kube.close()
