"""A service's links to NATS, Redis and the Kubernetes API, opened and closed the same way for every service:
each named after the service's replica, its readiness check registered with the ops endpoint, and all of
them closed when the service ends, the last opened first."""

from __future__ import annotations

import asyncio
import contextlib
import enum
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import redis.asyncio as aioredis
from nats.aio.client import Client as NatsClient

from shared.config.model import PodherdConfig
from shared.kube.client import KubeClient, api_check
from shared.nats import connect as nats_connect
from shared.redis import client as redis_client
from shared.service.ops import OpsServer
from shared.service.runtime import close_nats, nats_check


class Link(enum.Enum):
    NONE = "not opened"
    CHECKED = "opened, and the service is ready only while it answers"
    # Opened without a readiness check here: the service's own check covers it (the arbitrator's ledger
    # check reads Redis), or the service registers it once it serves (the gate, after its HTTPS site).
    UNCHECKED = "opened, readiness judged by the service"
    OPTIONAL = "opened where it is configured, used where it is"


@dataclass(frozen=True)
class Links:
    nats_client: NatsClient | None
    redis_client: aioredis.Redis | None
    kube_client: KubeClient | None

    @property
    def nats(self) -> NatsClient:
        assert self.nats_client is not None, "no NATS link was opened"
        return self.nats_client

    @property
    def redis(self) -> aioredis.Redis:
        assert self.redis_client is not None, "no Redis link was opened"
        return self.redis_client

    @property
    def kube(self) -> KubeClient:
        assert self.kube_client is not None, "no Kubernetes link was opened"
        return self.kube_client


@contextlib.asynccontextmanager
async def linked(
    role: str,
    config: PodherdConfig,
    stop: asyncio.Event,
    *,
    ops: OpsServer,
    nats: Link = Link.CHECKED,
    redis: Link = Link.NONE,
    kube: Link = Link.CHECKED,
    beside: Callable[[KubeClient], Awaitable[None]] | None = None,
) -> AsyncIterator[Links]:
    """The links `role` needs. The Kubernetes client and Redis connect on first use; NATS is connected here,
    waiting out a server that is away until `stop`. The readiness checks are registered once all are open,
    so a service is not ready before it could work.

    `beside`: work on the Kubernetes API that must not wait for NATS (a check of the service's identity),
    started first and ended with the service; its failure stops the service and is what it ends with."""
    name = f"podherd-{role}-{config.replica}"
    async with contextlib.AsyncExitStack() as opened:
        kube_client = None
        if kube is not Link.NONE:
            kube_client = _kube(config, required=kube is not Link.OPTIONAL)
            if kube_client is not None:
                opened.push_async_callback(kube_client.aclose)
        if beside is not None:
            assert kube_client is not None, "work beside the start needs the Kubernetes API"
            opened.push_async_callback(_ended, _started(beside(kube_client), stop))
        nc = None
        if nats is not Link.NONE:
            nc = await nats_connect.connect(config.nats, name=name, stop=stop)
            opened.push_async_callback(close_nats, nc)
        client = None
        if redis is not Link.NONE:
            client = redis_client.connect(config.redis, name=name)
            opened.push_async_callback(client.aclose)
        if nc is not None and nats is Link.CHECKED:
            ops.add_check("nats", nats_check(nc))
        if client is not None and redis is Link.CHECKED:
            ops.add_check("redis", redis_client.redis_check(client))
        if kube_client is not None and kube is Link.CHECKED:
            ops.add_check("kubernetes", api_check(kube_client))
        yield Links(nc, client, kube_client)


def _started(work: Awaitable[None], stop: asyncio.Event) -> asyncio.Task[None]:
    task = asyncio.ensure_future(work)
    task.add_done_callback(lambda done: stop.set() if not done.cancelled() and done.exception() else None)
    return task


async def _ended(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task  # its failure, if it failed: raised here, what the service ends with


def _kube(config: PodherdConfig, *, required: bool) -> KubeClient | None:
    if required:
        return KubeClient.from_config(config.kubernetes)
    with contextlib.suppress(Exception):
        return KubeClient.from_config(config.kubernetes)
    return None
