"""The ledger made whole again after Redis lost it (a restart, a flush, a failover that lost writes): one
replica at a time, under a lock, reads the running jobs' holdings from their PodMigrationJobs, replays what
the events stream last said of every object (facts, pending jobs), and marks the ledger complete with a new
generation. Until then admission stays closed."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import aiohttp
import msgspec

from services.arbitrator.engine import Engine
from shared.api import paths
from shared.api.pmj import PHASE_RUNNING
from shared.api.pmj_read import read_pmj
from shared.config.model import PodherdConfig
from shared.kube.client import KubeClient, KubeError
from shared.ledger.rebuild import HeldJob
from shared.ledger.store import Ledger, recorded
from shared.nats import bus
from shared.redis import client as redis_client

log = logging.getLogger(__name__)
# What the API server's being away looks like: waited out, as Redis's is.
API_OUTAGE = (KubeError, aiohttp.ClientError)


class LedgerRebuild:
    def __init__(
        self,
        config: PodherdConfig,
        ledger: Ledger,
        engine: Engine,
        *,
        kube: KubeClient | None,
        replay: Callable[[], Awaitable[int]],
    ) -> None:
        self.config, self.ledger, self.engine, self.kube, self.replay = config, ledger, engine, kube, replay

    async def ensure_ledger(self) -> bool:
        """True once the ledger is complete; rebuilds it (one replica at a time) when it is not."""
        generation = await self.ledger.completeness.generation()
        if generation is not None:
            self.engine.decisions.generation = generation
            return True
        lock = self.ledger.keys.key("rebuilding")
        if not await self.ledger.client.set(lock, self.config.replica, nx=True, ex=30):
            return False
        try:
            running = await self._running_jobs()
            refilled = await self.replay()
            count = await self.ledger.completeness.rebuild(running)
            await self.engine.durability.confirm()  # admitted against only once replicas hold it
            self.engine.decisions.generation = await self.ledger.completeness.generation() or ""
            log.warning("ledger rebuilt from %d running jobs (%d events replayed)", count, refilled)
            return True
        except (*redis_client.OUTAGE, *API_OUTAGE, bus.StreamUnreadable):
            raise  # the admission loop waits it out: the ledger stays incomplete, admissions closed
        except Exception:
            log.exception("ledger rebuild failed; admissions stay closed")
            return False
        finally:
            await self.ledger.client.delete(lock)

    async def _running_jobs(self) -> list[HeldJob]:
        if self.kube is None:
            return []
        body = await self.kube.arequest("GET", paths.JOBS)
        held = []
        for item in msgspec.json.decode(body)["items"]:
            job, invalid = read_pmj(item)
            if invalid is not None:
                continue  # holds nothing: the tracker ends it
            record = recorded(job.metadata.uid or "", job.metadata.annotations or {})
            if job.phase == PHASE_RUNNING and record is not None:
                held.append(record)
        return held
