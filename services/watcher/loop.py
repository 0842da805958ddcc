"""One kind's list+watch loop, publishing every change onto JetStream exactly as the API server reported it.

The loop (kopf's watching.py and client-go's reflector are the models):
- Start from the checkpointed resourceVersion when there is one; otherwise list, page by page, and publish
  every object, then watch from the list's resourceVersion.
- Watch with bookmarks; every event, bookmarks included, advances the resourceVersion. The server ends each
  watch after `watchTimeout`; the loop simply resumes from where it was.
- No byte at all for `inactivityTimeout` means a silently dead stream (a proxy dropped it): restart.
- 410 Gone means the resourceVersion left the server's window: relist, publish what changed, and publish
  DELETED for every object that vanished meanwhile. What was known before comes from memory, or after a
  restart from the stream itself (the last event of each object's subject).
- 429 and 5xx back off exponentially up to `backoffMax`; connection errors restart the watch.
- An object that does not decode is published with its identity and the error (the tracker fails a bad PMJ
  with the reason) instead of stopping the loop.

Publishing is pipelined; a checkpoint is written only after every event before it was acknowledged, so a
crash anywhere resumes without a gap, and `Nats-Msg-Id = uid/resourceVersion` removes the duplicates a
resume re-publishes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import aiohttp
import msgspec
import urllib3
from nats.js import JetStreamContext

from services.watcher import metrics
from services.watcher.checkpoints import Checkpoints
from services.watcher.decode import MetaOnly, RawList, WatchLine, WorkloadResolver
from services.watcher.kinds import Decoded, KindSpec
from services.watcher.sources import Known, decode_or_skip, follow_replicasets, known_from_stream
from shared.api import codec
from shared.api.messages import EventType, ObjectEvent
from shared.backoff import SharedBackoff
from shared.bus import Subjects
from shared.config import WatcherConfig
from shared.durations import parse_duration
from shared.kube import KubeClient, KubeError, error_from
from shared.publisher import Publisher
from shared.waits import cancel_and_wait, wait_event

log = logging.getLogger(__name__)
EVENT_TYPES = ("ADDED", "MODIFIED", "DELETED")


class _Status(msgspec.Struct):
    code: int = 0
    reason: str = ""
    message: str = ""


class Selection:
    """Which objects of a kind the watcher follows: `namespaces` (include/exclude) and, for pods, the
    label selector; what the API server can filter, it filters."""

    def __init__(self, spec: KindSpec, config: WatcherConfig) -> None:
        self.spec, self.config = spec, config
        namespaces = config.namespaces
        self.include = set(namespaces.include) if namespaces and namespaces.include else None

    def namespace_path(self) -> str | None:
        """The one namespace to list in, when only one is included."""
        if self.spec.namespaced and self.include and len(self.include) == 1:
            return next(iter(self.include))
        return None

    def query(self) -> list[tuple[str, str]]:
        query: list[tuple[str, str]] = []
        namespaces = self.config.namespaces
        if self.spec.namespaced and namespaces and namespaces.exclude:
            query.append(
                ("fieldSelector", ",".join(f"metadata.namespace!={ns}" for ns in namespaces.exclude))
            )
        if self.spec.plural == "pods" and self.config.label_selector:
            query.append(("labelSelector", self.config.label_selector))
        return query

    def wanted(self, namespace: str | None) -> bool:
        return not (self.spec.namespaced and self.include and (namespace or "") not in self.include)


class KindWatcher:
    def __init__(
        self,
        spec: KindSpec,
        kube: KubeClient,
        js: JetStreamContext,
        *,
        subjects: Subjects,
        checkpoints: Checkpoints,
        config: WatcherConfig,
        term: Callable[[], int | None],
        publisher: Publisher | None = None,
        ready: asyncio.Event | None = None,
        api_down: SharedBackoff | None = None,
    ) -> None:
        self.spec, self.kube, self.js, self.subjects = spec, kube, js, subjects
        self.checkpoints, self.config, self.term = checkpoints, config, term
        self.publisher = publisher or Publisher(js._nc)
        self.resolver = WorkloadResolver()
        self.api_down = api_down or api_backoff(kube, config)  # shared by the kinds: one line per step
        self.known: Known = {}  # what the stream holds, complete once listed
        self.known_complete = False
        self.rv: str | None = None  # resourceVersion of the last event handed to the publisher
        self.saved_rv: str | None = None  # resourceVersion of the last checkpoint
        self._arrivals: list[float] = []
        self.ready = ready or asyncio.Event()  # set once the first list or watch is established
        # Set when a checkpoint's flush found a publish unacknowledged: the watch stops and resumes from the
        # last checkpoint, so the lost event is published again (a later flush, with nothing pending, would
        # otherwise succeed and checkpoint past it).
        self._unacknowledged = asyncio.Event()
        self._counters = {t: metrics.EVENTS.labels(spec.plural, t) for t in EVENT_TYPES}
        self.selection = Selection(spec, config)

    async def run(self, stop: asyncio.Event) -> None:
        self.rv = self.saved_rv = await self.checkpoints.load(self.spec.plural)
        backoff = 0.25
        ceiling = parse_duration(self.config.backoff_max)
        ticker = asyncio.create_task(self._checkpoint_every(stop), name=f"checkpoint-{self.spec.plural}")
        resolver = None
        try:
            if self.spec.plural == "pods":
                resolver = asyncio.create_task(
                    follow_replicasets(self.kube, self.resolver, stop, api_down=self.api_down),
                    name="replicasets-for-pods",
                )
            while not stop.is_set():
                try:
                    if self.rv is None:
                        await self.relist()
                    await _until(stop, self._watch_while_acknowledged())
                    backoff = 0.25
                    continue
                except KubeError as exc:
                    if exc.gone:
                        log.info("%s: resourceVersion %s is gone; relisting", self.spec.plural, self.rv)
                        metrics.RESTARTS.labels(self.spec.plural, "gone").inc()
                        await self.flush()
                        self.rv = None
                        continue
                    reason = "throttled" if exc.status == 429 else ("server" if exc.retryable else "client")
                    metrics.RESTARTS.labels(self.spec.plural, reason).inc()
                    log.warning("%s: API error %s", self.spec.plural, exc)
                except (urllib3.exceptions.HTTPError, aiohttp.ClientError, OSError, TimeoutError) as exc:
                    if isinstance(exc, urllib3.exceptions.ReadTimeoutError):  # nothing came for too long
                        metrics.RESTARTS.labels(self.spec.plural, "inactive").inc()
                        log.warning("%s: watch stream ended (inactive): %s", self.spec.plural, exc)
                        continue
                    metrics.RESTARTS.labels(self.spec.plural, "connection").inc()
                    await _sleep_or_stop(stop, self.api_down.failed(f"{self.spec.plural}: {exc}"))
                    continue
                except PublishFailed as exc:
                    metrics.RESTARTS.labels(self.spec.plural, "publish").inc()
                    log.warning(
                        "%s: publishing failed, resuming from the checkpoint: %s", self.spec.plural, exc
                    )
                    self.rv = self.saved_rv
                await _sleep_or_stop(stop, backoff)
                backoff = min(ceiling, backoff * 2)
            await self.checkpoint()
        finally:
            await cancel_and_wait(ticker, resolver)

    async def _watch_while_acknowledged(self) -> None:
        self._unacknowledged.clear()
        await _until(self._unacknowledged, self.watch())
        if self._unacknowledged.is_set():
            raise PublishFailed("a publish since the last checkpoint was not acknowledged")

    async def relist(self) -> None:
        metrics.RELISTS.labels(self.spec.plural).inc()
        known = (
            self.known
            if self.known_complete
            else await known_from_stream(self.js, self.subjects, self.spec.plural)
        )
        seen: Known = {}
        token: str | None = None
        list_rv = ""
        path = self.spec.path(self.selection.namespace_path())
        while True:
            query = [("limit", str(self.config.page_size)), *self.selection.query()]
            if token:
                query.append(("continue", token))
            body = await self.kube.arequest("GET", path, query, request_timeout=120)
            page = msgspec.json.decode(body, type=RawList[msgspec.Raw])
            list_rv = list_rv or page.metadata.resourceVersion
            arrived = time.monotonic()
            for raw in page.items:
                decoded = decode_or_skip(self.spec, raw, self.resolver)
                if decoded is None:
                    continue
                meta = decoded.meta
                if not self.selection.wanted(meta.namespace):
                    continue
                seen[meta.uid] = (meta.namespace or "", meta.name, meta.resourceVersion)
                previous = known.get(meta.uid)
                if previous is not None and previous[2] == meta.resourceVersion:
                    continue  # already on the stream
                await self._emit("ADDED" if previous is None else "MODIFIED", decoded, arrived)
            token = page.metadata.continue_
            if not token:
                break
        for uid, (namespace, name, rv) in known.items():
            if uid not in seen:
                payload = self.spec.minimal(uid, namespace, name)
                event = ObjectEvent(
                    kind=self.spec.kind,
                    type="DELETED",
                    name=name,
                    uid=uid,
                    resource_version=rv,
                    namespace=namespace or None,
                    observed_at=datetime.now(UTC),
                    object=payload,
                )
                await self._publish(event, f"{uid}/deleted", time.monotonic())
        self.known = seen
        self.known_complete = True
        self.rv = list_rv
        await self.checkpoint()
        self.ready.set()
        self.api_down.answered()

    async def watch(self) -> None:
        query = [
            ("watch", "true"),
            ("resourceVersion", self.rv or ""),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(int(parse_duration(self.config.watch_timeout)))),
            *self.selection.query(),
        ]
        stream = self.kube.stream(
            self.spec.path(self.selection.namespace_path()),
            query,
            read_timeout=parse_duration(self.config.inactivity_timeout),
            opened=self.api_down.answered,
        )
        self.ready.set()
        async for line in stream:
            arrived = time.monotonic()
            try:
                event = msgspec.json.decode(line, type=WatchLine)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                metrics.DECODE_ERRORS.labels(self.spec.plural).inc()
                log.error("%s: undecodable watch line skipped: %s", self.spec.plural, exc)
                continue
            if event.type == "ERROR":
                status = msgspec.json.decode(event.object, type=_Status)
                raise error_from(status.code or 500, bytes(event.object))
            if event.type == "BOOKMARK":
                self.rv = msgspec.json.decode(event.object, type=MetaOnly).metadata.resourceVersion or self.rv
                continue
            decoded = decode_or_skip(self.spec, event.object, self.resolver)
            if decoded is None:
                continue
            if self.selection.wanted(decoded.meta.namespace):
                await self._emit(event.type, decoded, arrived)
            self.rv = decoded.meta.resourceVersion or self.rv

    # ----------------------------------------------------------------------------------------------------
    # Publishing and checkpoints

    async def _emit(self, event_type: EventType, decoded: Decoded, arrived: float) -> None:
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

    async def _checkpoint_every(self, stop: asyncio.Event) -> None:
        interval = parse_duration(self.config.checkpoint_interval)
        while not stop.is_set():
            await _sleep_or_stop(stop, interval)
            try:
                await self.checkpoint()
            except PublishFailed as exc:
                log.warning("%s: checkpoint skipped, publishing failed: %s", self.spec.plural, exc)
                self._unacknowledged.set()
            except Exception:
                log.exception("%s: checkpoint failed", self.spec.plural)


class PublishFailed(Exception):
    """JetStream did not acknowledge a publish; the loop resumes from its last checkpoint."""


async def _sleep_or_stop(stop: asyncio.Event, seconds: float) -> None:
    await wait_event(stop, seconds)


async def _until(stop: asyncio.Event, work: Awaitable[None]) -> None:
    """Run `work` until it ends or `stop` is set (then cancel it)."""
    task = asyncio.ensure_future(work)
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        await cancel_and_wait(stopper, task)
    if not task.cancelled():
        task.result()  # re-raises the work's own exception, if any


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


def api_backoff(kube: KubeClient, config: WatcherConfig) -> SharedBackoff:
    """The API server as the watch loops wait for it: from 0.25 s, doubling up to `watcher.backoffMax`."""
    cap = parse_duration(config.backoff_max)
    return SharedBackoff("the Kubernetes API server", kube.api.configuration.host, first=0.25, cap=cap)
