"""A service's links to NATS, Redis and the Kubernetes API, opened and closed the same way for every service:
each named after the service's replica, its readiness check registered with the ops endpoint, and all of
them closed when the service ends, the last opened first."""

from __future__ import annotations

import asyncio
import contextlib
import enum
from collections.abc import AsyncIterator
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
    # Opened without a readiness check of its own: the service's own check covers it (the arbitrator's
    # ledger check reads Redis), or, for the Kubernetes API, it is used only where it is configured.
    UNCHECKED = "opened, readiness judged by the service"


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
) -> AsyncIterator[Links]:
    """The links `role` needs: NATS first (connecting waits out a server that is away, until `stop`), then
    Redis and the Kubernetes client (both connect on first use)."""
    name = f"podherd-{role}-{config.replica}"
    async with contextlib.AsyncExitStack() as opened:
        nc = None
        if nats is not Link.NONE:
            nc = await nats_connect.connect(config.nats, name=name, stop=stop)
            opened.push_async_callback(close_nats, nc)
            if nats is Link.CHECKED:
                ops.add_check("nats", nats_check(nc))
        client = None
        if redis is not Link.NONE:
            client = redis_client.connect(config.redis, name=name)
            opened.push_async_callback(client.aclose)
            if redis is Link.CHECKED:
                ops.add_check("redis", redis_client.redis_check(client))
        kube_client = None
        if kube is not Link.NONE:
            kube_client = _kube(config, required=kube is Link.CHECKED)
            if kube_client is not None:
                opened.push_async_callback(kube_client.aclose)
                if kube is Link.CHECKED:
                    ops.add_check("kubernetes", api_check(kube_client))
        yield Links(nc, client, kube_client)


def _kube(config: PodherdConfig, *, required: bool) -> KubeClient | None:
    if required:
        return KubeClient.from_config(config.kubernetes)
    with contextlib.suppress(Exception):
        return KubeClient.from_config(config.kubernetes)
    return None
