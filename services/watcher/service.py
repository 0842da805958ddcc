"""The watcher service: one active replica per kind, chosen by a lease in NATS KV; the others stand by.

Split-brain is harmless by construction: two replicas watching the same objects publish the same
`Nats-Msg-Id`s (uid/resourceVersion), which JetStream stores once; checkpoints are fenced by the lease
revision. A standby takes over when the lease is released (at once) or expires (within its TTL).

Sharding beyond one active watcher per kind (very large clusters): run watcher groups with disjoint
`watcher.namespaces.include` sets and a distinct `replica`-independent scope; each group holds its own
leases and checkpoints (`scope`), and all publish into the same stream, whose subjects already carry the
namespace. Cluster-scoped kinds (nodes, PMJs, Reservations) stay with one group.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext
from nats.js.kv import KeyValue

from services.watcher import metrics
from services.watcher.checkpoints import Checkpoints
from services.watcher.kinds import KindSpec, watched
from services.watcher.loop import KindWatcher, api_backoff
from shared.config.model import PodherdConfig
from shared.core.durations import parse_duration
from shared.core.waits import cancel_and_wait
from shared.kube.client import KubeClient
from shared.nats import bus
from shared.nats.lease import Lease
from shared.service.links import linked
from shared.service.ops import OpsServer

log = logging.getLogger(__name__)


class Watcher:
    def __init__(self, config: PodherdConfig, nc: NatsClient, kube: KubeClient, *, scope: str = "") -> None:
        self.config = config
        self.nc = nc
        self.js: JetStreamContext = nc.jetstream()
        self.kube = kube
        self.subjects = bus.Subjects(config.nats.subject_prefix)
        self.scope = scope
        self.active: dict[str, KindWatcher] = {}
        self.leases: dict[str, Lease] = {}
        # Set once this replica has listed (or resumed) a kind; cleared again when it stands down.
        self.synced = {spec.plural: asyncio.Event() for spec in watched(config.watcher)}
        self.set_up = bus.SetUp("watcher")
        self.api_down = api_backoff(kube, config.watcher)  # one line per step for all the kinds' watches

    async def setup(self) -> tuple[KeyValue, KeyValue]:
        await bus.ensure_events_stream(self.js, self.subjects, self.config.nats)
        checkpoints = await bus.ensure_kv(self.js, self.subjects.watch_bucket, self.config.nats)
        leases = await bus.ensure_kv(self.js, self.subjects.lease_bucket, self.config.nats)
        return checkpoints, leases

    async def run(self, stop: asyncio.Event) -> None:
        buckets = await bus.prepared(stop, self.setup, "watcher", state=self.set_up)
        if buckets is None:
            return
        checkpoint_kv, lease_kv = buckets
        checkpoints = Checkpoints(checkpoint_kv, self.scope)
        kinds = watched(self.config.watcher)
        await asyncio.gather(*(self._supervise(spec, checkpoints, lease_kv, stop=stop) for spec in kinds))

    async def _supervise(
        self, spec: KindSpec, checkpoints: Checkpoints, lease_kv: KeyValue, *, stop: asyncio.Event
    ) -> None:
        key = f"watcher.{spec.plural}{'.' + self.scope if self.scope else ''}"
        lease = Lease(lease_kv, key, self.config.replica, ttl=parse_duration(self.config.watcher.lease_ttl))
        self.leases[spec.plural] = lease
        while not stop.is_set():
            try:
                if not await lease.wait_for_turn(stop):
                    return
            except Exception as exc:
                log.warning("lease %s unavailable: %s", key, exc)
                await asyncio.sleep(1)
                continue
            metrics.LEADER.labels(spec.plural).set(1)
            inner = asyncio.Event()
            watcher = KindWatcher(
                spec,
                self.kube,
                self.js,
                subjects=self.subjects,
                checkpoints=checkpoints,
                config=self.config.watcher,
                term=_term_of(lease),
                ready=self.synced[spec.plural],
                api_down=self.api_down,
            )
            self.active[spec.plural] = watcher
            work = asyncio.create_task(watcher.run(inner), name=f"watch-{spec.plural}")
            holder = asyncio.create_task(lease.hold(stop), name=f"lease-{spec.plural}")
            lost = asyncio.create_task(lease.lost.wait())
            stopping = asyncio.create_task(stop.wait())
            await asyncio.wait({work, lost, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if lease.lost.is_set() and not stop.is_set():
                work.cancel()  # fenced: not one more publish or checkpoint
            inner.set()
            await asyncio.wait({work})  # its outcome is read below
            await cancel_and_wait(holder, lost, stopping)
            self.active.pop(spec.plural, None)
            self.synced[spec.plural].clear()
            metrics.LEADER.labels(spec.plural).set(0)
            if stop.is_set():
                await lease.release()
            elif work.done() and not work.cancelled() and work.exception():
                log.error("%s watcher failed: %r; handing the lease over", spec.plural, work.exception())
                await lease.release()
                await asyncio.sleep(1)


def _term_of(lease: Lease) -> Callable[[], int | None]:
    return lambda: lease.revision


async def main(config: PodherdConfig, stop: asyncio.Event, ops: OpsServer) -> None:
    async with linked("watcher", config, stop, ops=ops) as links:
        watcher = Watcher(config, links.nats, links.kube)

        async def watches_ready() -> str | None:
            waiting = [kind for kind in watcher.active if not watcher.synced[kind].is_set()]
            return f"watches not established: {', '.join(waiting)}" if waiting else None

        ops.add_check("jetstream", watcher.set_up.check)
        ops.add_check("watches", watches_ready)
        await watcher.run(stop)
