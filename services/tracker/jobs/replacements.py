"""Which replacement pod stands for a job: the pods seen in reserved room (the workload's pool), and the
claim of one of them by one job only, in Redis. The rules of which may be claimed are `claims` (pure)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.client import Pipeline

from services.tracker.jobs import claims
from services.tracker.jobs.claims import Ident
from services.tracker.jobs.decode import pod_view, reservation_view
from services.tracker.jobs.machine import PodView, ReservationView
from services.tracker.keys import TrackerKeys
from shared.api import paths
from shared.api.messages import PodInfo
from shared.api.names import LABEL_CONTROLLER
from shared.api.pmj import PodMigrationJob
from shared.ledger.scripts import as_text
from shared.redis.durable import Durability


class Replacements:
    def __init__(
        self,
        client: aioredis.Redis,
        keys: TrackerKeys,
        durability: Durability,
        *,
        listing: Callable[[str, str], Awaitable[list[dict[str, Any]]]],
    ) -> None:
        self.client, self.keys, self.durability, self.listing = client, keys, durability, listing

    def seen(self, pod: PodInfo, controller: str, *, deleted: bool, pipe: Pipeline) -> None:
        """A pod in reserved room: the replacement some job of its workload stands for. Once it is gone,
        so is its claim: no job can take it for its replacement any more (commands of `pipe`)."""
        entry = json.dumps([pod.namespace, pod.name, pod.uid])
        if deleted:
            pipe.srem(self.keys.pool(controller), entry)
            pipe.hdel(self.keys.claims, pod.uid)
        else:
            pipe.sadd(self.keys.pool(controller), entry)

    async def claim(
        self, job: PodMigrationJob, own: list[ReservationView], pods: PodReads
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
            listed = await self.listing(paths.RESERVATIONS, f"{LABEL_CONTROLLER}={controller}")
            workload = [reservation_view(item) for item in listed]
            tried = set(first)
            rest = [c for c in claims.candidates(own, pooled, workload) if c not in tried]
            claimed = await self._claim_first(
                uid, job.metadata.name or "", pods, controller=controller, candidates=rest
            )
        return claimed

    async def claim_bound(
        self, job: PodMigrationJob, own: ReservationView, pods: PodReads
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
        self, uid: str, job: str, pods: PodReads, *, controller: str | None, candidates: list[Ident]
    ) -> tuple[str, str, str] | None:
        if not candidates:
            return None
        pool = self.keys.pool(controller or "")
        # Who holds each, in one round trip: the claim itself is the atomic HSETNX below, so a holder read a
        # moment early costs nothing but a candidate tried in vain.
        holders = await self.client.hmget(self.keys.claims, [pod_uid for _, _, pod_uid in candidates])
        stale: list[str] = []  # taken, gone, not ours: out of the workload's pool
        for (namespace, name, pod_uid), raw in zip(candidates, holders, strict=True):
            holder = as_text(raw) if raw is not None else None
            view = None if holder not in (None, uid) else await pods.view((namespace, name, pod_uid))
            if view is None or not claims.may_claim(
                uid, holder, controller, pod_controller=view.controller_uid
            ):
                stale.append(json.dumps([namespace, name, pod_uid]))
                continue
            if holder is not None or await self.client.hsetnx(self.keys.claims, pod_uid, uid):
                entry = json.dumps([namespace, name, pod_uid])
                pipe = self.client.pipeline(transaction=False)
                pipe.hset(self.keys.replacement, uid, entry)
                # Before the caller reads the replacement: its readiness, from now on, reconciles this job.
                pipe.hset(self.keys.replacement_jobs, f"{namespace}/{name}", job)
                pipe.srem(pool, entry, *stale)
                await pipe.execute()
                # Held by replicas before the job ends on it: a claim a failover lost would let another
                # job claim the same replacement.
                await self.durability.confirm()
                # Read again, now that its changes reconcile this job: one that became Ready after the read
                # above (and before the line above) kicked no one, and would be waited for until a resync.
                pods.forget(namespace, name)
                return namespace, name, pod_uid
        if stale:
            await self.client.srem(pool, *stale)
        return None

    async def pool(self, reservations: list[ReservationView]) -> None:
        """Remember every replacement seen in a Reservation of the workload until a job claims it: the
        Reservation may be cleaned up (its job ended) before the job that replacement stands for looks."""
        pipe = self.client.pipeline(transaction=False)
        for r in reservations:
            for bound in r.bound:
                if r.owner_controller_uid:
                    pipe.sadd(self.keys.pool(r.owner_controller_uid), json.dumps(list(bound)))
        if pipe:
            await pipe.execute()


class PodReads:
    """The pods one observation reads by identity, each read once (a pod by its name holding another uid is
    not the pod named)."""

    def __init__(self, get: Callable[[str], Awaitable[dict[str, Any] | None]]) -> None:
        self.get = get
        self.found: dict[tuple[str, str], PodView | None] = {}

    def forget(self, namespace: str, name: str) -> None:
        self.found.pop((namespace, name), None)

    async def view(self, ident: tuple[str, str, str]) -> PodView | None:
        namespace, name, uid = ident
        if (namespace, name) not in self.found:
            found = await self.get(paths.pod(namespace, name))
            self.found[namespace, name] = pod_view(found) if found is not None else None
        view = self.found[namespace, name]
        return view if view is not None and view.uid == uid else None
