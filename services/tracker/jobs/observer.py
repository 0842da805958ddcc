"""What the tracker reads to decide a job: its PMJ, pod, Reservations, the arbitrator's decision and the
executor's reports, and which replacement pod stands for it (claimed in Redis, one job per pod).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import redis.asyncio as aioredis

from services.tracker.jobs import machine
from services.tracker.jobs.decode import node_ready, pod_view, reservation_view
from services.tracker.jobs.machine import ReservationView
from services.tracker.jobs.replacements import PodReads, Replacements
from services.tracker.keys import TrackerKeys
from shared.api import codec, paths
from shared.api.messages import Decision, Report
from shared.api.names import LABEL_JOB
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
from shared.config.model import MigrationControllerArgs
from shared.kube.client import KubeClient
from shared.ledger.scripts import as_text
from shared.nats.consume import read_or_retry
from shared.redis.durable import Durability


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
        self.replacements = Replacements(client, keys, durability, listing=self.list)

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
        await self.replacements.pool(reservations)
        # Ended: what it made is all that is left to see (and clean up); its pods are not read again.
        ended = job.phase in TERMINAL_PHASES
        # The replacement is most often the pod bound in the job's own room (and a StatefulSet's has the
        # job's pod's name): each pod is read once for all its uses here.
        pods = PodReads(self.get)
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
            claimed = await self.replacements.claim(job, reservations, pods)
        elif not ended and surge and current is not None and current.bound:
            claimed = await self.replacements.claim_bound(
                job, current, pods
            )  # the surge's pod: its Reservation's taker
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
            reserve_retrying=reserve_report.message
            if reserve_report and reserve_report.outcome == "blocked" and not current
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

    async def list(self, path: str, selector: str) -> list[dict[str, Any]]:
        return await read_or_retry(self.kube.list_items(path, selector), f"listing {path}", 0.5)

    async def get(self, path: str) -> dict[str, Any] | None:
        return await read_or_retry(self.kube.get_json(path), f"reading {path}", 0.5)


async def _deleted_by_others(
    o: Observer, first_seen: bytes | None, *, going: bool, report: Report | None
) -> bool:
    """Evicting through the Eviction API, a pod deleted outright went by someone else's hand (a scale-down,
    a preemption) before its eviction. Not so after a surge's scale-down (not `going` here), or an eviction
    answered "evicting in background" (a controller deletes the pod for it)."""
    policy = (report.policy if report is not None else None) or o.args.eviction_policy
    if not going or first_seen is None or policy != "Eviction":
        return False
    if report is not None and report.outcome == "background":
        return False
    return bool(await o.client.get(o.keys.deletion(as_text(first_seen))) == b"deleted")


def _deferral(raw: bytes | None) -> str:
    """What the arbitrator last said the job waits for; a window's wait is said from its opening instead."""
    deferred = codec.decode(raw, Decision) if raw else None
    return deferred.message if deferred is not None and deferred.window is None else ""
