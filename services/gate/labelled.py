"""The pods that carry Podherd's opt-in label, `podherd.io/evacuate` (whatever its value), as a list and
watch of the API server keeps them: an eviction of a pod this cache does not hold, in a namespace not opted
in as a whole, is answered without asking the API server anything. A pod labelled a moment ago and evicted
before its event arrives is missed (milliseconds on a healthy cluster); the gate is not ready until its
first list is in, so it never answers from an empty cache."""

from __future__ import annotations

import asyncio
import logging

import aiohttp
import msgspec
import urllib3
from prometheus_client import Gauge

from shared.api import paths
from shared.api.meta import ObjectMeta
from shared.api.names import LABEL_EVACUATE
from shared.core.backoff import Backoff
from shared.kube.client import KubeClient, KubeError

log = logging.getLogger(__name__)
WATCH_SECONDS = 300
LABELLED = Gauge(
    "podherd_gate_labelled_pods", "Pods labelled podherd.io/evacuate, as the gate's watch holds them"
)


class _Pod(msgspec.Struct):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)


class _List(msgspec.Struct):
    metadata: ObjectMeta  # a list's: its resourceVersion
    items: list[_Pod] = msgspec.field(default_factory=list)


class _Event(msgspec.Struct):
    type: str
    object: msgspec.Raw


class LabelledPods:
    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube
        self.values: dict[tuple[str, str], str] = {}  # (namespace, name) -> the label's value
        self.synced = asyncio.Event()
        self.down = Backoff("the Kubernetes API server", kube.api.configuration.host)

    def value(self, namespace: str, name: str) -> str | None:
        return self.values.get((namespace, name))

    async def ready(self) -> str | None:
        return None if self.synced.is_set() else "the opted-in pods are not listed yet"

    async def run(self, stop: asyncio.Event) -> None:
        version = ""
        while not stop.is_set():
            try:
                version = version or await self._list()
                version = await self._watch(version, stop)
                self.down.answered()
            except KubeError as exc:
                if exc.gone:
                    version = ""
                    continue
                await self.down.pause(stop, exc)
            except (aiohttp.ClientError, urllib3.exceptions.HTTPError, OSError) as exc:
                await self.down.pause(stop, exc)

    async def _list(self) -> str:
        query = [("labelSelector", LABEL_EVACUATE)]
        listing = msgspec.json.decode(await self.kube.arequest("GET", paths.PODS, query), type=_List)
        self.values = {_key(p): _value(p) for p in listing.items}
        LABELLED.set(len(self.values))
        self.synced.set()
        return listing.metadata.resource_version or ""

    async def _watch(self, version: str, stop: asyncio.Event) -> str:
        """Follows the changes from `version`; the version to follow on from when the watch ends."""
        query = [
            ("labelSelector", LABEL_EVACUATE),
            ("watch", "true"),
            ("resourceVersion", version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(WATCH_SECONDS)),
        ]
        lines = self.kube.stream(paths.PODS, query, read_timeout=WATCH_SECONDS + 30)
        async for line in lines:
            if stop.is_set():
                break
            event = msgspec.json.decode(line, type=_Event)
            if event.type == "ERROR":
                status = msgspec.json.decode(event.object)
                raise KubeError(
                    int(status.get("code") or 500), status.get("reason", ""), status.get("message", "")
                )
            pod = msgspec.json.decode(event.object, type=_Pod)
            version = pod.metadata.resource_version or version
            key = _key(pod)
            if event.type == "DELETED":
                self.values.pop(key, None)
            elif event.type in ("ADDED", "MODIFIED"):
                self.values[key] = _value(pod)
            LABELLED.set(len(self.values))
        return version


def _key(pod: _Pod) -> tuple[str, str]:
    return pod.metadata.namespace or "", pod.metadata.name or ""


def _value(pod: _Pod) -> str:
    return (pod.metadata.labels or {}).get(LABEL_EVACUATE, "")
