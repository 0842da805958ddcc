"""What one kind's watch loop hands on: its events published onto JetStream, pipelined, and its position (the
resourceVersion every acknowledged event reached) checkpointed only after every event before it was
acknowledged, so a crash anywhere resumes without a gap. `Nats-Msg-Id = uid/resourceVersion` removes the
duplicates a resume re-publishes."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import msgspec

from services.watcher import metrics
from services.watcher.checkpoints import Checkpoints
from services.watcher.kinds import Decoded, KindSpec
from services.watcher.sources import Known
from shared.api import codec
from shared.api.messages import EventType, ObjectEvent
from shared.core.durations import parse_duration
from shared.core.waits import wait_event
from shared.kube.client import KubeClient
from shared.nats.bus import Subjects
from shared.nats.publisher import Publisher

log = logging.getLogger(__name__)
EVENT_TYPES = ("ADDED", "MODIFIED", "DELETED")


class PublishFailed(Exception):
    """JetStream did not acknowledge a publish; the loop resumes from its last checkpoint."""


class Emitter:
    def __init__(
        self,
        spec: KindSpec,
        kube: KubeClient,
        *,
        subjects: Subjects,
        publisher: Publisher,
        checkpoints: Checkpoints,
        term: Callable[[], int | None],
    ) -> None:
        self.spec, self.kube, self.subjects, self.publisher = spec, kube, subjects, publisher
        self.checkpoints, self.term = checkpoints, term
        self.known: Known = {}  # what the stream holds, complete once listed
        self.known_complete = False
        self.rv: str | None = None  # resourceVersion of the last event handed to the publisher
        self.saved_rv: str | None = None  # resourceVersion of the last checkpoint
        self._arrivals: list[float] = []
        # Set when a checkpoint's flush found a publish unacknowledged: the watch stops and resumes from the
        # last checkpoint, so the lost event is published again (a later flush, with nothing pending, would
        # otherwise succeed and checkpoint past it).
        self.unacknowledged = asyncio.Event()
        self._counters = {t: metrics.EVENTS.labels(spec.plural, t) for t in EVENT_TYPES}

    async def emit(self, event_type: EventType, decoded: Decoded, arrived: float) -> None:
        meta = decoded.meta
        if event_type not in EVENT_TYPES:
            return
        event = ObjectEvent(
            kind=self.spec.kind,
            type=event_type,
            name=meta.name,
            uid=meta.uid,
            resource_version=meta.resourceVersion,
            namespace=meta.namespace,
            observed_at=datetime.now(UTC),
            object=await payload_of(self.kube, self.spec, decoded, event_type=event_type),
            error=decoded.error,
        )
        await self._publish(event, f"{meta.uid}/{meta.resourceVersion}", arrived)
        if event_type == "DELETED":
            self.known.pop(meta.uid, None)
        else:
            self.known[meta.uid] = (meta.namespace or "", meta.name, meta.resourceVersion)
        self.rv = meta.resourceVersion or self.rv

    async def vanished(self, uid: str, known: tuple[str, str, str]) -> None:
        """An object the stream holds that a relist no longer found: DELETED, with what is known of it."""
        namespace, name, rv = known
        event = ObjectEvent(
            kind=self.spec.kind,
            type="DELETED",
            name=name,
            uid=uid,
            resource_version=rv,
            namespace=namespace or None,
            observed_at=datetime.now(UTC),
            object=self.spec.minimal(uid, namespace, name),
        )
        await self._publish(event, f"{uid}/deleted", time.monotonic())

    async def _publish(self, event: ObjectEvent[Any], msg_id: str, arrived: float) -> None:
        subject = self.subjects.event(self.spec.plural, event.namespace, event.name)
        try:
            await self.publisher.publish(subject, codec.encode(event), msg_id)
        except Exception as exc:
            raise PublishFailed(str(exc)) from exc
        self._arrivals.append(arrived)
        self._counters[event.type].inc()

    async def flush(self) -> None:
        started = time.monotonic()
        arrivals, self._arrivals = self._arrivals, []
        try:
            count = await self.publisher.flush()
        except Exception as exc:
            raise PublishFailed(str(exc)) from exc
        if count:
            now = time.monotonic()
            metrics.PUBLISH_SECONDS.labels(self.spec.plural).observe(now - started)
            lag = metrics.LAG_SECONDS.labels(self.spec.plural)
            for arrived in arrivals:
                lag.observe(now - arrived)

    async def checkpoint(self) -> None:
        """Flush, then record the resourceVersion every acknowledged event reached."""
        rv = self.rv
        await self.flush()
        term = self.term()
        if rv is None or rv == self.saved_rv or term is None:
            return
        await self.checkpoints.save(self.spec.plural, rv, term)
        self.saved_rv = rv
        with contextlib.suppress(ValueError):
            metrics.RESOURCE_VERSION.labels(self.spec.plural).set(int(rv))

    async def checkpoint_every(self, stop: asyncio.Event, interval: str) -> None:
        seconds = parse_duration(interval)
        while not stop.is_set():
            await wait_event(stop, seconds)
            try:
                await self.checkpoint()
            except PublishFailed as exc:
                log.warning("%s: checkpoint skipped, publishing failed: %s", self.spec.plural, exc)
                self.unacknowledged.set()
            except Exception:
                log.exception("%s: checkpoint failed", self.spec.plural)


async def payload_of(kube: KubeClient, spec: KindSpec, decoded: Decoded, *, event_type: EventType) -> Any:
    """What an event carries: the object as decoded; a configured workload kind's with the replica count its
    /scale subresource gives (Koordinator's controller finder reads it so), or 0 without one, as that
    finder counts a controller it cannot scale."""
    workload = decoded.payload
    if not spec.scaled or event_type == "DELETED" or decoded.error is not None:
        return workload
    scale = await kube.get_json(f"{spec.path(workload.namespace)}/{workload.name}/scale")
    replicas = ((scale or {}).get("spec") or {}).get("replicas") or 0
    return msgspec.structs.replace(workload, replicas=int(replicas))
