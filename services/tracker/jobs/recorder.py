"""Kubernetes Events about jobs, sent beside the reconciles instead of inside them, as client-go's recorder
does: a bounded queue that a few senders drain. An Event is a note for `kubectl describe`, never state, so
when the API server falls so far behind that the queue is full, the newest is dropped and counted (client-go
drops them too) rather than slowing a migration down."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from prometheus_client import Counter

from shared.api import paths
from shared.kube.client import KubeClient

log = logging.getLogger("services.tracker")
DROPPED = Counter("podherd_tracker_events_dropped_total", "Kubernetes Events dropped: the queue was full")
FAILED = Counter("podherd_tracker_events_failed_total", "Kubernetes Events the API server did not take")

QUEUED_AT_MOST = 1000
SENDERS = 4


class EventRecorder:
    def __init__(self, kube: KubeClient, *, capacity: int = QUEUED_AT_MOST) -> None:
        self.kube = kube
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(capacity)

    def record(self, event: dict[str, Any]) -> None:
        try:
            self.queue.put_nowait(event)
        except asyncio.QueueFull:
            DROPPED.inc()

    async def run(self, stop: asyncio.Event, *, drain_within: float = 5.0) -> None:
        """Send until `stop`, then what is queued by then, for up to `drain_within` seconds."""
        senders = [asyncio.create_task(self._send_forever()) for _ in range(SENDERS)]
        try:
            await stop.wait()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(drain_within):
                    await self.queue.join()
        finally:
            for sender in senders:
                sender.cancel()
            await asyncio.gather(*senders, return_exceptions=True)

    async def _send_forever(self) -> None:
        while True:
            event = await self.queue.get()
            try:
                namespace = event["metadata"]["namespace"]
                await self.kube.arequest("POST", paths.events(namespace), body=event)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # an Event the API server refused or did not answer: noted, not retried
                FAILED.inc()
                log.debug("event %s not recorded: %s", event["metadata"]["name"], exc)
            finally:
                self.queue.task_done()
