"""The planner service: off unless `planner.enabled`. The replica holding the planner's lease (NATS KV,
handed over within its TTL) plans every `planner.interval`; the others wait for the lease. Stateless: what
a run knows, it reads from the cluster; what it did, the jobs say."""

from __future__ import annotations

import asyncio
import logging

from nats.aio.client import Client as NatsClient
from nats.js.kv import KeyValue

from services.planner import metrics
from services.planner.cycle import Cycle
from shared.config.model import PodherdConfig
from shared.core.durations import parse_duration
from shared.core.waits import cancel_and_wait, wait_event
from shared.kube.client import KubeClient, KubeError
from shared.nats import bus
from shared.nats.lease import Lease
from shared.service.links import linked
from shared.service.ops import OpsServer

log = logging.getLogger(__name__)
LEASE_KEY = "planner"


class Planner:
    def __init__(self, config: PodherdConfig, nc: NatsClient, kube: KubeClient) -> None:
        self.config, self.nc, self.kube = config, nc, kube
        self.subjects = bus.Subjects(config.nats.subject_prefix)
        self.set_up = bus.SetUp("planner")
        self.cycle = Cycle(config, nc, kube)
        self.lease: Lease | None = None

    async def setup(self) -> KeyValue:
        return await bus.ensure_kv(self.nc.jetstream(), self.subjects.lease_bucket, self.config.nats)

    async def run(self, stop: asyncio.Event) -> None:
        if not self.config.planner.enabled:
            log.warning("planner.enabled is false: this replica plans nothing")
            await stop.wait()
            return
        kv = await bus.prepared(stop, self.setup, "planner", state=self.set_up)
        if kv is None:
            return
        ttl = parse_duration(self.config.planner.lease_ttl)
        lease = self.lease = Lease(kv, LEASE_KEY, self.config.replica, ttl=ttl)
        while not stop.is_set():
            if not await lease.wait_for_turn(stop):
                return
            metrics.LEADER.set(1)
            holder = asyncio.create_task(lease.hold(stop), name="planner-lease")
            try:
                await self._plan_while_held(lease, stop)
            finally:
                await cancel_and_wait(holder)
                metrics.LEADER.set(0)
                if stop.is_set():
                    await lease.release()

    async def _plan_while_held(self, lease: Lease, stop: asyncio.Event) -> None:
        interval = parse_duration(self.config.planner.interval)
        while not stop.is_set() and not lease.lost.is_set():
            try:
                await self.cycle.once()
            except (
                KubeError,
                OSError,
                TimeoutError,
            ) as exc:  # the API or NATS away: the next run tries again
                log.warning("planning run failed: %s", exc)
            await wait_event(stop, interval)


async def main(config: PodherdConfig, stop: asyncio.Event, ops: OpsServer) -> None:
    async with linked("planner", config, stop, ops=ops) as links:
        planner = Planner(config, links.nats, links.kube)
        ops.add_check("jetstream", planner.set_up.check)
        await planner.run(stop)
