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

What it sees goes to its Emitter (services.watcher.emitter): published, pipelined, and checkpointed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

import aiohttp
import msgspec
import urllib3
from nats.js import JetStreamContext

from services.watcher import metrics
from services.watcher.checkpoints import Checkpoints
from services.watcher.emitter import Emitter, PublishFailed
from services.watcher.kinds import KindSpec
from services.watcher.sources import Known, decode_or_skip, follow_replicasets, known_from_stream
from shared.api.objects import MetaOnly, RawList, WatchLine, WorkloadResolver
from shared.config.model import WatcherConfig
from shared.core.backoff import SharedBackoff
from shared.core.durations import parse_duration
from shared.core.waits import cancel_and_wait, wait_event
from shared.kube.client import KubeClient, KubeError, error_from
from shared.nats.bus import StreamUnreadable, Subjects
from shared.nats.publisher import Publisher

log = logging.getLogger(__name__)


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
        self.spec, self.kube, self.js, self.subjects, self.config = spec, kube, js, subjects, config
        self.out = Emitter(
            spec,
            kube,
            subjects=subjects,
            publisher=publisher or Publisher(js._nc),
            checkpoints=checkpoints,
            term=term,
        )
        self.checkpoints = checkpoints
        self.resolver = WorkloadResolver()
        self.api_down = api_down or api_backoff(kube, config)  # shared by the kinds: one line per step
        self.ready = ready or asyncio.Event()  # set once the first list or watch is established
        self.selection = Selection(spec, config)

    async def run(self, stop: asyncio.Event) -> None:
        out = self.out
        out.rv = out.saved_rv = await self.checkpoints.load(self.spec.plural)
        backoff = 0.25
        ceiling = parse_duration(self.config.backoff_max)
        ticker = asyncio.create_task(
            out.checkpoint_every(stop, self.config.checkpoint_interval), name=f"checkpoint-{self.spec.plural}"
        )
        resolver = None
        try:
            if self.spec.plural == "pods":
                resolver = asyncio.create_task(
                    follow_replicasets(self.kube, self.resolver, stop, api_down=self.api_down),
                    name="replicasets-for-pods",
                )
            while not stop.is_set():
                try:
                    if out.rv is None:
                        await self.relist()
                    await _until(stop, self._watch_while_acknowledged())
                    backoff = 0.25
                    continue
                except KubeError as exc:
                    if exc.gone:
                        log.info("%s: resourceVersion %s is gone; relisting", self.spec.plural, out.rv)
                        metrics.RESTARTS.labels(self.spec.plural, "gone").inc()
                        await out.flush()
                        out.rv = None
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
                    out.rv = out.saved_rv
                except StreamUnreadable as exc:  # what consumers know is unknown: no relist against nothing
                    metrics.RESTARTS.labels(self.spec.plural, "publish").inc()
                    log.warning("%s: relisting waits for the events stream: %s", self.spec.plural, exc)
                await _sleep_or_stop(stop, backoff)
                backoff = min(ceiling, backoff * 2)
            await out.checkpoint()
        finally:
            await cancel_and_wait(ticker, resolver)

    async def _watch_while_acknowledged(self) -> None:
        self.out.unacknowledged.clear()
        await _until(self.out.unacknowledged, self.watch())
        if self.out.unacknowledged.is_set():
            raise PublishFailed("a publish since the last checkpoint was not acknowledged")

    async def relist(self) -> None:
        metrics.RELISTS.labels(self.spec.plural).inc()
        out = self.out
        known = (
            out.known
            if out.known_complete
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
                await out.emit("ADDED" if previous is None else "MODIFIED", decoded, arrived)
            token = page.metadata.continue_
            if not token:
                break
        for uid, was in known.items():
            if uid not in seen:
                await out.vanished(uid, was)
        out.known = seen
        out.known_complete = True
        out.rv = list_rv
        await out.checkpoint()
        self.ready.set()
        self.api_down.answered()

    async def watch(self) -> None:
        out = self.out
        query = [
            ("watch", "true"),
            ("resourceVersion", out.rv or ""),
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
                out.rv = msgspec.json.decode(event.object, type=MetaOnly).metadata.resourceVersion or out.rv
                continue
            decoded = decode_or_skip(self.spec, event.object, self.resolver)
            if decoded is None:
                continue
            if self.selection.wanted(decoded.meta.namespace):
                await out.emit(event.type, decoded, arrived)
            out.rv = decoded.meta.resourceVersion or out.rv


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


def api_backoff(kube: KubeClient, config: WatcherConfig) -> SharedBackoff:
    """The API server as the watch loops wait for it: from 0.25 s, doubling up to `watcher.backoffMax`."""
    cap = parse_duration(config.backoff_max)
    return SharedBackoff("the Kubernetes API server", kube.api.configuration.host, first=0.25, cap=cap)
