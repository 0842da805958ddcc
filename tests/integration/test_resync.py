"""The tracker's resync (what finds jobs again after Redis lost them) goes through every open job: one that
cannot run, or whose handling fails, does not stop it from reaching the jobs listed after it; one a tracker
recorded as ended since the list is left alone."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import nats
import pytest

from kubesim.sim import SimHandle
from podherd.harness.servers import Server
from services.tracker.jobs.effects import Effects
from services.tracker.jobs.observer import Observer
from services.tracker.jobs.periodic import Periodic
from services.tracker.jobs.state import JobState
from services.tracker.keys import TrackerKeys
from shared.config.model import KubernetesConfig, PodherdConfig
from shared.kube.client import KubeClient
from shared.ledger.scripts import as_text
from shared.nats import bus
from shared.nats.publisher import Publisher
from shared.redis import client as redis_client
from tests.e2e.pipeline import create_job
from tests.e2e.test_lifecycle import cluster, start, web_pods

pytestmark = pytest.mark.integration


async def test_the_resync_reaches_every_job_past_one_it_cannot_handle(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, podherd_config: PodherdConfig
) -> None:
    kube = start(kubesim_factory, cluster(web=1))
    (pod,) = web_pods(kube)
    create_job(kube, "a-cannot-run", pod, mode="Teleport")  # listed first
    create_job(kube, "b-breaks-its-handler", pod)
    create_job(kube, "c-fine", pod)
    create_job(kube, "d-ended-since-the-list", pod)  # listed open; a tracker has written its end since
    client = redis_client.connect(podherd_config.redis)
    api = KubeClient.from_config(KubernetesConfig(kubeconfig=str(kube.handle.kubeconfig)))
    nc = await nats.connect(nats_srv.url)
    keys = TrackerKeys(podherd_config.redis.key_prefix)
    args = podherd_config.migration_controller
    reached: list[str] = []

    async def reconcile(name: str) -> None:
        reached.append(name)
        if name.startswith("b-"):
            raise RuntimeError("a bug in the handler")

    try:
        periodic = Periodic(
            client,
            keys,
            api,
            reconcile=reconcile,
            observer=Observer(
                client, keys, api, args=args, durability=redis_client.durability(client, podherd_config.redis)
            ),
            state=JobState(client, keys, args.default_job_ttl),
            effects=Effects(
                podherd_config, nc, api, publisher=Publisher(nc), subjects=bus.Subjects("resync")
            ),
        )
        await client.hset(keys.phases, "d-ended-since-the-list", "Succeeded")
        await periodic.resync()
        assert reached == ["a-cannot-run", "b-breaks-its-handler", "c-fine"]
        tracked = cast(list[bytes], await client.zrange(keys.deadlines, 0, -1))  # members only
        assert {as_text(t) for t in tracked} == set(reached)  # each tracked again, the unreadable one too
    finally:
        await client.delete(keys.deadlines, keys.pod_jobs, keys.phases)
        await client.aclose()
        await api.aclose()
        await nc.close()
