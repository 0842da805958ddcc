"""A storm of jobs through two replicas of each service while a fault strikes the servers under them, and
what every such storm must end with: each job Succeeded with a replacement of its own, no limit exceeded."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kubesim.sim import SimHandle
from podherd.harness.servers import Server
from podherd.watchdog.invariants import Findings, Watchdog
from shared.config.model import PodherdConfig
from shared.kube.client import KubeClient
from shared.redis import client as redis_client
from tests.e2e.pipeline import GROUP, PLURAL, VERSION, create_job, ended, pipeline, pipeline_config
from tests.e2e.test_lifecycle import cluster, start, until_no_reservations, web_pods
from tests.e2e.test_pipeline import until_all_ended
from tests.kube import Kube, watch_until

JOBS = 30


@dataclass
class Storm:
    pods: list[str]  # the pods the jobs moved
    final: dict[str, dict[str, Any]]  # each job as it ended
    findings: Findings  # the watchdog's, from the first job to the last Reservation gone


def storm_cluster(kubesim_factory: Callable[..., SimHandle]) -> Kube:
    return start(kubesim_factory, cluster(nodes=12, web=JOBS, node_cpu=16, cpu="100m"))


def storm_config(kube: Kube, nats_srv: Server, redis_srv: Server, test_id: str) -> PodherdConfig:
    return pipeline_config(
        kube.handle, nats_srv, redis_srv, test_id, maxMigratingPerWorkload=8, maxUnavailablePerWorkload=8
    )


async def storm(
    kube: Kube,
    config: PodherdConfig,
    fault: Callable[[], Awaitable[None]],
    *,
    after: Callable[[], Awaitable[None]] | None = None,
) -> Storm:
    """A job for every web pod; once some have ended and most are in flight, `fault`; once all have ended,
    `after` (a server brought back); then until their Reservations are gone."""
    pods = sorted(web_pods(kube))
    prefix = config.redis.key_prefix
    redis = redis_client.connect(config.redis)
    watched = KubeClient.from_config(config.kubernetes)
    watchdog = Watchdog(watched, redis, prefix, args=config.migration_controller)
    stop = asyncio.Event()
    watching = asyncio.create_task(watchdog.run(stop))
    try:
        async with pipeline(config, replicas=2):
            for i, pod in enumerate(pods):
                create_job(kube, f"storm-{i:03d}", pod)
            await asyncio.to_thread(
                watch_until,
                kube.custom.list_cluster_custom_object,
                lambda state: sum(ended(j) for j in state.values()) >= 3,
                60,
                group=GROUP,
                version=VERSION,
                plural=PLURAL,
            )
            await fault()
            final = await until_all_ended(kube, JOBS)
            if after is not None:
                await after()
            await asyncio.to_thread(until_no_reservations, kube)
        stop.set()
        findings = await watching
    finally:
        stop.set()
        await redis.aclose()
        await watched.aclose()
    return Storm(pods, final, findings)


def assert_each_job_moved_once(kube: Kube, ran: Storm) -> None:
    phases = [j["status"]["phase"] for j in ran.final.values()]
    assert phases.count("Succeeded") == JOBS, {p: phases.count(p) for p in set(phases)}
    replacements = {j["status"]["podRef"]["name"] for j in ran.final.values()}
    live = web_pods(kube)
    assert len(replacements) == JOBS and replacements == set(live) and not set(ran.pods) & set(live)
    findings = ran.findings
    assert findings.limits_exceeded == 0, (findings.slot_breaches, findings.workload_breaches)
