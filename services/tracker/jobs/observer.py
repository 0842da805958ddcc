"""What the tracker reads to decide a job: its PMJ, pod, Reservations, the arbitrator's decision and the
executor's reports, and which replacement pod stands for it (claimed in Redis, one job per pod).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.client import Pipeline

from services.tracker.jobs import claims, machine
from services.tracker.jobs.claims import Ident
from services.tracker.jobs.decode import node_ready, pod_view, reservation_view
from services.tracker.jobs.machine import PodView, ReservationView
from services.tracker.keys import TrackerKeys
from shared.api import codec, paths
from shared.api.messages import Decision, PodInfo, Report
from shared.api.names import LABEL_CONTROLLER, LABEL_JOB
from shared.api.pmj import (
    MODE_EVICT_DIRECTLY,
    PHASE_FAILED,
    PHASE_PENDING,
    PHASE_RUNNING,
    TERMINAL_PHASES,
    PodMigrationJob,
)
from shared.api.reservation import attempt_of, made_for, reservation_name
from shared.api.surge import STRATEGY_SURGE, is_surge
from shared.config import MigrationControllerArgs
from shared.consume import read_or_retry
from shared.durable import Durability
from shared.kube import KubeClient
from shared.redis_scripts import as_text


class Observer:
    def __init__(
        self,
        client: aioredis.Redis,
        keys: TrackerKeys,
        kube: KubeClient,
        *,
        args: MigrationControllerArgs,
        durability: Durability,
    ) -> None:
        self.client, self.keys, self.kube, self.args = client, keys, kube, args
        self.durability = durability

    def replacement_seen(self, pod: PodInfo, controller: str, *, deleted: bool, pipe: Pipeline) -> None:
        """A pod in reserved room: the replacement some job of its workload stands for. Once it is gone,
        so is its claim: no job can take it for its replacement any more (commands of `pipe`)."""
        entry = json.dumps([pod.namespace, pod.name, pod.uid])
        if deleted:
            pipe.srem(self.keys.pool(controller), entry)
            pipe.hdel(self.keys.claims, pod.uid)
        else:
            pipe.sadd(self.keys.pool(controller), entry)

    async def observe(self, job: PodMigrationJob) -> machine.Observed:
        uid = job.metadata.uid or ""
        ref = job.spec.pod_ref
        pipe = self.client.pipeline(transaction=False)
        for kept in (self.keys.decisions, self.keys.windows, self.keys.deferrals):
            pipe.hget(kept, uid)
        pipe.hgetall(self.keys.reports(uid))
        pipe.hexists(self.keys.workload_uid_of, job.metadata.name or "")  # an eviction was sent
        pipe.hget(self.keys.attempts, uid)
        pipe.hget(self.keys.pod_uids, uid)
        pipe.hexists(self.keys.pods_gone, uid)
        pipe.hget(self.keys.phases, job.metadata.name or "")
        got = await pipe.execute()
        raw_decision, raw_wait, deferral, raw_reports, evicting, raw_asked, first_seen, gone, audited = got
        asked = int(raw_asked or 0)
        decision = codec.decode(raw_decision, Decision) if raw_decision else None
        waited = codec.decode(raw_wait, Decision).window if raw_wait else None
        openings = [w for w in (waited, decision.window if decision else None) if w is not None]
        reports = {as_text(k): codec.decode(v, Report) for k, v in raw_reports.items()}
        # The Reservations first, the pod after: a pod still there when read after its Reservation was seen
        # taken has not been evicted, so whoever took the room is not its replacement (read the other way
        # round, an eviction and the rebinding in between would look like a sibling taking it).
        reservations, attempt = await self._reservations(job, asked)
        await self._pool(reservations)
        # Ended: what it made is all that is left to see (and clean up); its pods are not read again.
        ended = job.phase in TERMINAL_PHASES
        # The replacement is most often the pod bound in the job's own room (and a StatefulSet's has the
        # job's pod's name): each pod is read once for all its uses here.
        pods = _PodReads(self)
        pod = None
        if not ended and not gone and ref is not None and ref.namespace and ref.name:
            found = await self.get(paths.pod(ref.namespace, ref.name))
            view = pods.found[ref.namespace, ref.name] = pod_view(found) if found is not None else None
            if view is not None:
                # The pod the job was made for: a new pod by the same name (a StatefulSet's) is not it.
                # Noted the first time, in one transaction: a Redis restart between the write and the read
                # must not read back nothing and take the job's own pod for another (its job for Succeeded).
                if first_seen is None:
                    pipe = self.client.pipeline(transaction=True)
                    pipe.hsetnx(self.keys.pod_uids, uid, ref.uid or view.uid)
                    pipe.hget(self.keys.pod_uids, uid)
                    _, first_seen = await pipe.execute()
                expected = as_text(first_seen) if first_seen is not None else ref.uid or view.uid
                pod = view if view.uid == expected else None
                if pod is not None and pod.deleted_at is not None and pod.node:
                    node = await self.get(paths.node(pod.node))  # why it may not go: NotReady
                    pod = replace(pod, node_ready=node_ready(node) if node is not None else None)
            if pod is None and first_seen is not None:  # seen once, now gone (or the name holds another)
                await self.client.hset(self.keys.pods_gone, uid, 1)
        current = reservations[-1] if reservations else None
        bound_pod = None
        if not ended and current is not None and current.bound:
            bound_pod = await pods.view(current.bound[0])
        started = any(c.type == "Eviction" for c in (job.status.conditions if job.status else None) or [])
        # Asked for, or chosen by the arbitrator (its decision says so until the PMJ records it).
        surge = is_surge(job.metadata.annotations) or (
            decision is not None and decision.strategy == STRATEGY_SURGE
        )
        claimed = None
        if not ended and started and (pod is None or pod.terminating) and current is not None and not surge:
            claimed = await self._claim(job, reservations, pods)
        elif not ended and surge and current is not None and current.bound:
            claimed = await self._claim_bound(job, current, pods)  # the surge's pod: its Reservation's taker
        replacement = await pods.view(claimed) if claimed else None
        evict_report = reports.get("evict")
        going = not ended and started and not surge and (pod is None or pod.terminating)
        deleted_by_others = await _deleted_by_others(self, first_seen, going=going, report=evict_report)
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
            asked=asked,
            eviction_note=evict_report.message
            if evict_report and evict_report.outcome == "blocked"
            else None,
            # Sent, and not refused or done yet: the executor may have found the room and be evicting.
            eviction_sent=bool(evicting) and (evict_report is None or evict_report.outcome == "checked"),
            deleted_by_others=deleted_by_others,
            reserve_failed=reserve_report.message
            if reserve_report and reserve_report.outcome == "failed" and not current
            else None,
            surge=surge,
            surged=reports.get("surge"),
            scaled_back=reports.get("scale-back"),
            window=max(openings, key=lambda w: w.opens_at) if openings else None,
            audited=as_text(audited) if audited is not None else None,
            deferral=_deferral(deferral),
            default_mode=self.args.default_job_mode,
            default_ttl=self.args.default_job_ttl,
            dry_run=self.args.dry_run,
        )

    async def _reservations(self, job: PodMigrationJob, asked: int) -> tuple[list[ReservationView], int]:
        """The job's Reservations, oldest attempt first, and the current attempt (0: none yet): the one the
        user named, else those Podherd made for it (its reservationRef then names the latest). `asked`: the
        latest attempt the tracker asked for, so each is read by its name; unknown (Redis lost it), they are
        listed by their label."""
        name, ref = job.metadata.name or "", job.spec.reservation_ref_name
        if named := job.user_reservation:
            found = await self.get(paths.reservation(named))
            return ([reservation_view(found)], 1) if found is not None else ([], 0)
        if ref is None and (job.spec.mode or self.args.default_job_mode) == MODE_EVICT_DIRECTLY:
            return [], 0  # evicted directly: Podherd makes it no Reservation (and names none)
        items: list[dict[str, Any]] = []
        if asked:
            names = [reservation_name(name, attempt) for attempt in range(1, asked + 1)]
            found_each = await asyncio.gather(*(self.get(paths.reservation(n)) for n in names))
            items = [r for r in found_each if r is not None and made_for(r, name)]
        elif job.phase != PHASE_PENDING:  # a Pending job was never asked a Reservation for
            items = await self.list(paths.RESERVATIONS, f"{LABEL_JOB}={name}")
        items.sort(key=attempt_of)
        attempt = attempt_of(items[-1]) if items else 0
        return [reservation_view(r) for r in items], attempt

    async def _claim(
        self, job: PodMigrationJob, own: list[ReservationView], pods: _PodReads
    ) -> tuple[str, str, str] | None:
        """The replacement this job stands for, once its pod is evicted: one pod that took a Reservation of
        the workload, claimed by one job only (Reservations are per workload, so a replacement may have
        taken another job's room, and that job then reserves again). The workload's Reservations are
        listed only when neither the job's own nor the replacements seen so far give one."""
        uid = job.metadata.uid or ""
        if (mine := await self._claimed_before(uid)) is not None:
            return mine
        controller = own[-1].owner_controller_uid
        pool = self.keys.pool(controller or "")
        pooled: list[Ident] = []
        if controller:
            pooled = [tuple(json.loads(member)) for member in await self.client.smembers(pool)]
        first = claims.candidates(own, pooled, ())
        claimed = await self._claim_first(
            uid, job.metadata.name or "", pods, controller=controller, candidates=first
        )
        if claimed is None and controller:  # none seen yet: any the workload's Reservations name
            listed = await self.list(paths.RESERVATIONS, f"{LABEL_CONTROLLER}={controller}")
            workload = [reservation_view(item) for item in listed]
            tried = set(first)
            rest = [c for c in claims.candidates(own, pooled, workload) if c not in tried]
            claimed = await self._claim_first(
                uid, job.metadata.name or "", pods, controller=controller, candidates=rest
            )
        return claimed

    async def _claim_bound(
        self, job: PodMigrationJob, own: ReservationView, pods: _PodReads
    ) -> tuple[str, str, str] | None:
        """A surge's replacement: the pod in its own Reservation (claimed, so no other job takes it)."""
        if (mine := await self._claimed_before(job.metadata.uid or "")) is not None:
            return mine
        return await self._claim_first(
            job.metadata.uid or "",
            job.metadata.name or "",
            pods,
            controller=own.owner_controller_uid,
            candidates=list(own.bound),
        )

    async def _claimed_before(self, uid: str) -> tuple[str, str, str] | None:
        mine = await self.client.hget(self.keys.replacement, uid)
        if mine is None:
            return None
        namespace, name, pod_uid = json.loads(mine)
        return namespace, name, pod_uid

    async def _claim_first(
        self, uid: str, job: str, pods: _PodReads, *, controller: str | None, candidates: list[Ident]
    ) -> tuple[str, str, str] | None:
        pool = self.keys.pool(controller or "")
        for namespace, name, pod_uid in candidates:
            raw = await self.client.hget(self.keys.claims, pod_uid)
            holder = as_text(raw) if raw is not None else None
            view = None if holder not in (None, uid) else await pods.view((namespace, name, pod_uid))
            if view is None or not claims.may_claim(
                uid, holder, controller, pod_controller=view.controller_uid
            ):
                await self.client.srem(pool, json.dumps([namespace, name, pod_uid]))  # taken, gone, not ours
                continue
            if holder is not None or await self.client.hsetnx(self.keys.claims, pod_uid, uid):
                entry = json.dumps([namespace, name, pod_uid])
                pipe = self.client.pipeline(transaction=False)
                pipe.hset(self.keys.replacement, uid, entry)
                # Before the caller reads the replacement: its readiness, from now on, reconciles this job.
                pipe.hset(self.keys.replacement_jobs, f"{namespace}/{name}", job)
                pipe.srem(pool, entry)
                await pipe.execute()
                # Held by replicas before the job ends on it: a claim a failover lost would let another
                # job claim the same replacement.
                await self.durability.confirm()
                # Read again, now that its changes reconcile this job: one that became Ready after the read
                # above (and before the line above) kicked no one, and would be waited for until a resync.
                pods.forget(namespace, name)
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

    async def list(self, path: str, selector: str) -> list[dict[str, Any]]:
        return await read_or_retry(self.kube.list_items(path, selector), f"listing {path}", 0.5)

    async def get(self, path: str) -> dict[str, Any] | None:
        return await read_or_retry(self.kube.get_json(path), f"reading {path}", 0.5)


class _PodReads:
    """The pods one observation reads by identity, each read once (a pod by its name holding another uid is
    not the pod named)."""

    def __init__(self, observer: Observer) -> None:
        self.observer = observer
        self.found: dict[tuple[str, str], PodView | None] = {}

    def forget(self, namespace: str, name: str) -> None:
        self.found.pop((namespace, name), None)

    async def view(self, ident: tuple[str, str, str]) -> PodView | None:
        namespace, name, uid = ident
        if (namespace, name) not in self.found:
            found = await self.observer.get(paths.pod(namespace, name))
            self.found[namespace, name] = pod_view(found) if found is not None else None
        view = self.found[namespace, name]
        return view if view is not None and view.uid == uid else None


async def _deleted_by_others(
    o: Observer, first_seen: bytes | None, *, going: bool, report: Report | None
) -> bool:
    """Evicting through the Eviction API, a pod deleted outright went by someone else's hand (a scale-down,
    a preemption) before its eviction. Not so after a surge's scale-down (not `going` here), or an eviction
    answered "evicting in background" (a controller deletes the pod for it)."""
    if not going or first_seen is None or o.args.eviction_policy != "Eviction":
        return False
    if report is not None and report.outcome == "background":
        return False
    return bool(await o.client.get(o.keys.deletion(as_text(first_seen))) == b"deleted")


def _deferral(raw: bytes | None) -> str:
    """What the arbitrator last said the job waits for; a window's wait is said from its opening instead."""
    deferred = codec.decode(raw, Decision) if raw else None
    return deferred.message if deferred is not None and deferred.window is None else ""
