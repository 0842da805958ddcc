"""The planner service on a skewed cluster, with the four services: two replicas, one plans (the lease);
its moves go as intents under the identity of its token, become jobs like any, and end with every node
under its targets; while they are in flight it plans nothing more, and once they are done it finds nothing
to move. Disabled (the default), it plans nothing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import msgspec
import nats
import pytest

from kubesim.scenarios import skewed
from kubesim.sim import SimHandle
from podherd.harness import descheduler_style
from podherd.harness.servers import Server
from services.planner import metrics
from services.planner.service import Planner
from shared.api.names import ANNOTATION_CLAIMED_REQUESTER, ANNOTATION_REQUESTER
from shared.config.model import PodherdConfig
from shared.core.waits import cancel_and_wait
from shared.kube.client import KubeClient
from tests.e2e.pipeline import GROUP, PLURAL, VERSION, pipeline, pipeline_config
from tests.e2e.test_lifecycle import until_no_reservations
from tests.kube import Kube, client_for
from tests.polling import until

pytestmark = [pytest.mark.e2e, pytest.mark.integration]
TARGETS = {"cpu": 50.0, "memory": 50.0, "pods": 50.0}


@asynccontextmanager
async def planners(config: PodherdConfig, replicas: int) -> AsyncIterator[list[Planner]]:
    running: list[tuple[Planner, asyncio.Task[None], Any, KubeClient]] = []
    stop = asyncio.Event()
    for i in range(replicas):
        mine = msgspec.structs.replace(config, replica=f"planner-{i}")
        nc = await nats.connect(config.nats.url)
        kube = KubeClient.from_config(config.kubernetes)
        planner = Planner(mine, nc, kube)
        running.append((planner, asyncio.create_task(planner.run(stop)), nc, kube))
    try:
        yield [p for p, *_ in running]
    finally:
        stop.set()
        await cancel_and_wait(*(t for _, t, *_ in running))
        for _, _, nc, kube in running:
            await nc.close()
            await kube.aclose()


def jobs(kube: Kube) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = kube.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)["items"]
    return items


def runs(outcome: str) -> float:
    return metrics.RUNS.labels(outcome)._value.get()  # type: ignore[no-any-return]


async def test_the_leader_plans_sends_and_waits_for_its_moves_then_finds_nothing_to_do(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    handle = kubesim_factory(skewed(10))
    kube = client_for(handle)
    base = pipeline_config(handle, nats_srv, redis_srv, test_id)
    planner = msgspec.structs.replace(base.planner, enabled=True, interval="500ms")
    config = msgspec.structs.replace(base, planner=planner)
    waited, nothing = runs("waiting"), runs("nothing")
    async with pipeline(config), planners(config, 2) as replicas:
        await until(
            lambda: any(p.lease and p.lease.held for p in replicas), within=30, what="a planner's lease"
        )
        assert sum(1 for p in replicas if p.lease and p.lease.held) == 1
        await until(lambda: jobs(kube) or None, within=30, what="the planner's first jobs")
        # In flight: the leader plans nothing more (runs every half second meanwhile).
        await until(lambda: runs("waiting") > waited or None, within=30, what="a run that waited")

        def done() -> bool | None:
            found = jobs(kube)
            return all((j.get("status") or {}).get("phase") in ("Succeeded", "Failed") for j in found) or None

        await until(done, within=90, what="the planner's jobs ended")
        await asyncio.to_thread(until_no_reservations, kube)
        # Done: the next run finds nothing to move, and makes no job.
        await until(lambda: runs("nothing") > nothing or None, within=30, what="a run with nothing to move")
        final = jobs(kube)
    assert {j["status"]["phase"] for j in final} == {"Succeeded"}
    assert len(final) == 6  # LowNodeUtilization's six moves on this cluster: one plan, sent once
    annotations = [j["metadata"]["annotations"] for j in final]
    assert {a[ANNOTATION_CLAIMED_REQUESTER] for a in annotations} == {"podherd-planner"}
    assert {a[ANNOTATION_REQUESTER] for a in annotations} == {"system:serviceaccount:podherd:tests"}
    assert descheduler_style.over_targets(kube.core, TARGETS) == []


async def test_a_disabled_planner_plans_nothing(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    handle = kubesim_factory(skewed(10))
    kube = client_for(handle)
    config = pipeline_config(handle, nats_srv, redis_srv, test_id)
    assert not config.planner.enabled  # the default
    async with planners(config, 1) as [planner]:
        await asyncio.sleep(0)  # its run has begun: it waits for stop, holding no lease
        assert planner.lease is None
    assert jobs(kube) == []
