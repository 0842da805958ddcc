"""What a kind's watch loop reads beside its own watch: the objects the event stream already holds (the
last event of each object's subject), the ReplicaSets that name pods' workloads, and each object decoded
or skipped.
"""

from __future__ import annotations

import asyncio
import logging

import aiohttp
import msgspec
from nats.js import JetStreamContext

from services.watcher import metrics
from services.watcher.kinds import KINDS, Decoded, KindSpec
from shared.api.messages import EventHead
from shared.api.objects import RawList, RawWorkload, WatchLine, WorkloadResolver
from shared.core.backoff import SharedBackoff
from shared.core.waits import wait_event
from shared.kube.client import KubeClient
from shared.nats.bus import Subjects, last_per_subject

log = logging.getLogger("services.watcher.loop")
Known = dict[str, tuple[str, str, str]]  # uid -> (namespace, name, resourceVersion)


async def known_from_stream(js: JetStreamContext, subjects: Subjects, plural: str) -> Known:
    """The last event of every object's subject: what consumers believe exists."""
    known: Known = {}
    stream = subjects.events_stream
    async for chunk in last_per_subject(js, stream, subjects.events_of(plural)):
        for msg in chunk:
            head = msgspec.json.decode(msg.data, type=EventHead)
            if head.type == "DELETED":
                known.pop(head.uid, None)
            else:
                known[head.uid] = (head.namespace or "", head.name, head.resource_version)
    return known


async def follow_replicasets(
    kube: KubeClient, resolver: WorkloadResolver, stop: asyncio.Event, *, api_down: SharedBackoff
) -> None:
    """Keep `resolver` knowing every ReplicaSet's owner, so pods name their Deployment. An API server that
    does not answer is waited for with the watches' backoff (one line per step for all of them)."""
    spec = KINDS["replicasets"]
    rv = ""
    while not stop.is_set():
        try:
            if not rv:
                body = await kube.arequest("GET", spec.path(), [], request_timeout=120)
                listing = msgspec.json.decode(body, type=RawList[RawWorkload])
                for rs in listing.items:
                    resolver.observe("ADDED", rs)
                rv = listing.metadata.resourceVersion
            query = [
                ("watch", "true"),
                ("resourceVersion", rv),
                ("allowWatchBookmarks", "true"),
                ("timeoutSeconds", "300"),
            ]
            async for line in kube.stream(spec.path(), query, read_timeout=300, opened=api_down.answered):
                event = msgspec.json.decode(line, type=WatchLine)
                if event.type == "ERROR":
                    rv = ""
                    break
                obj = msgspec.json.decode(event.object, type=RawWorkload)
                if event.type != "BOOKMARK":
                    resolver.observe(event.type, obj)
                rv = obj.metadata.resourceVersion or rv
        except (OSError, TimeoutError, aiohttp.ClientError) as exc:
            rv = ""
            await wait_event(stop, api_down.failed(f"replicasets: {exc}"))
        except Exception as exc:
            log.warning("replicaset follower restarting: %s", exc)
            rv = ""
            await wait_event(stop, 1.0)


def decode_or_skip(spec: KindSpec, raw: bytes, resolver: WorkloadResolver) -> Decoded | None:
    """The object decoded; None (logged and counted) for one that does not decode at all."""
    try:
        decoded = spec.decode(raw, resolver)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        metrics.DECODE_ERRORS.labels(spec.plural).inc()
        log.error("%s: object skipped, it does not decode: %s", spec.plural, exc)
        return None
    if decoded.error:
        metrics.DECODE_ERRORS.labels(spec.plural).inc()
    return decoded
