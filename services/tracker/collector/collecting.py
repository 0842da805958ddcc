"""The collector: finished jobs are deleted `collector.retention` after they ended (the rule is in
`collectable`), so that at thousands of migrations a day they do not pile up in etcd and slow every list.

One replica collects at a time: each pass (every `collector.interval`) belongs to the replica that sets the
pass's key in Redis. For each job to collect, in this order: its name goes into the `collected` KV bucket
(kept for `collector.dedupWindow`: an intent re-sent for it answers with that job and makes no new one, so
the same pod is not moved twice), a `collected` record goes to the job's audit subject (its history outlives
the object), then the job is deleted with its uid and resourceVersion as preconditions (one that changed
meanwhile waits for the next pass). The deletion reaches the trackers as any deleted job does: whatever it
still held (a Reservation, ledger slots) goes with it.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from datetime import UTC, datetime
from typing import Any

import redis.asyncio as aioredis
from nats.js import JetStreamContext
from nats.js.kv import KeyValue
from prometheus_client import Counter

from services.tracker.collector.collectable import collectable
from services.tracker.keys import TrackerKeys
from shared.api import paths
from shared.api.audit import actor, audit_record
from shared.config.model import PodherdConfig
from shared.core.durations import parse_duration
from shared.core.waits import wait_event
from shared.kube.client import KubeClient, KubeError
from shared.nats import bus
from shared.nats.publisher import Publisher

log = logging.getLogger(__name__)
COLLECTED = Counter("podherd_jobs_collected_total", "Finished PodMigrationJobs deleted after their retention")


async def collected_names(js: JetStreamContext, subjects: bus.Subjects, config: PodherdConfig) -> KeyValue:
    """The bucket of collected jobs' names (created on first use, entries expiring after the window)."""
    window = parse_duration(config.collector.dedup_window)
    return await bus.ensure_kv(js, subjects.collected_bucket, config.nats, ttl=window)


class Collector:
    def __init__(
        self,
        config: PodherdConfig,
        client: aioredis.Redis,
        kube: KubeClient,
        *,
        publisher: Publisher,
        js: JetStreamContext,
    ) -> None:
        self.config = config
        self.client = client
        self.kube = kube
        self.publisher = publisher
        self.js = js
        self.subjects = bus.Subjects(config.nats.subject_prefix)
        self.retention = parse_duration(config.collector.retention)
        self.interval = parse_duration(config.collector.interval)
        self.pass_key = TrackerKeys(config.redis.key_prefix).collector_pass

    async def run(self, stop: asyncio.Event) -> None:
        if not self.config.collector.enabled:
            return
        # Tried again while JetStream elects its leaders, as every service's setup is.
        bucket = functools.partial(collected_names, self.js, self.subjects, self.config)
        names = await bus.prepared(stop, bucket, "collector")
        if names is None:
            return
        while not stop.is_set():
            await wait_event(stop, self.interval)
            if stop.is_set():
                return
            try:
                await self.sweep(names)
            except Exception:
                log.exception("collecting finished jobs failed; trying again next pass")

    async def sweep(self, names: KeyValue) -> int:
        """One pass, if this replica takes it: returns how many jobs it collected."""
        one_pass = int(self.interval * 900)  # ms: a little less than the interval, so the next pass is free
        if not await self.client.set(self.pass_key, self.config.replica, nx=True, px=one_pass):
            return 0
        now = datetime.now(UTC)
        collected = 0
        for job in await self.kube.list_items(paths.JOBS, ""):
            if collectable(job, now, self.retention) and await self._collect(names, job):
                collected += 1
        return collected

    async def _collect(self, names: KeyValue, job: dict[str, Any]) -> bool:
        meta = job["metadata"]
        name, uid = meta["name"], meta.get("uid") or ""
        pod = (job.get("spec") or {}).get("podRef") or {}
        remembered = {"uid": uid, "pod": f"{pod.get('namespace', '')}/{pod.get('name', '')}"}
        await names.put(name, json.dumps(remembered).encode())
        record = audit_record(
            "collected",
            by=actor("tracker", self.config.replica),
            job=name,
            job_uid=uid,
            phase=(job.get("status") or {}).get("phase"),
            message=f"deleted {self.config.collector.retention} after it ended (collector.retention)",
        )
        await self.publisher.publish_audit(self.subjects.audit(name), record)
        await self.publisher.flush()
        preconditions = {"uid": uid, "resourceVersion": meta.get("resourceVersion")}
        try:
            await self.kube.arequest("DELETE", paths.job(name), body={"preconditions": preconditions})
        except KubeError as exc:
            if exc.status in (404, 409):  # gone already, or changed since the list: the next pass decides
                return False
            raise
        COLLECTED.inc()
        log.info("collected %s", name, extra={"job": name})
        return True
