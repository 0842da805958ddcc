"""What the tracker reads to see a job's Reservations: each attempt it asked for by its name, and a list by
the job's label only when Redis no longer knows which attempts it asked for (a flush, a restart). kubesim
and Redis are real; kubesim counts the requests by verb."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import pytest
import redis.asyncio as aioredis

from kubesim.sim import SimHandle
from podherd.servers import Server
from services.executor.reservations import reservation_for
from services.tracker.keys import TrackerKeys
from services.tracker.observation import Observer
from shared.api.pmj import PodMigrationJob
from shared.api.pod import pod_from
from shared.api.reservation import LABEL_ATTEMPT, LABEL_CREATED_BY, LABEL_JOB, reservation_name
from shared.config import KubernetesConfig, MigrationControllerArgs
from shared.kube import KubeClient
from tests.e2e.pipeline import GROUP, VERSION, paused_job
from tests.e2e.test_lifecycle import cluster, start, web_pods

pytestmark = [pytest.mark.integration]


def make_job(kube: Any, name: str, pod: str, phase: str | None) -> PodMigrationJob:
    status = {"phase": phase, "message": "reserving"} if phase else None
    return msgspec.convert(paused_job(kube, name, pod, status), PodMigrationJob)


def make_room(kube: Any, pod: dict[str, Any], job: str, attempt: int, *, by: str = "podherd") -> None:
    body = reservation_for(PodMigrationJob(), pod_from(pod), "5m")
    labels = {LABEL_CREATED_BY: by, LABEL_JOB: job, LABEL_ATTEMPT: str(attempt)}
    body["metadata"] = {"name": reservation_name(job, attempt), "labels": labels}
    kube.custom.create_cluster_custom_object(GROUP, VERSION, "reservations", body)


async def test_reservations_are_read_by_the_names_asked_for_and_listed_once_redis_forgot(
    kubesim_factory: Callable[..., SimHandle], redis_srv: Server, test_id: str
) -> None:
    kube = start(kubesim_factory, cluster())
    pods = [kube.api.sanitize_for_serialization(p) for _, p in sorted(web_pods(kube).items())]
    running = make_job(kube, "running", pods[0]["metadata"]["name"], "Running")
    waiting = make_job(kube, "waiting", pods[1]["metadata"]["name"], None)
    make_room(kube, pods[0], "running", 1)
    make_room(kube, pods[0], "running", 2)
    make_room(kube, pods[1], "other", 1)
    client = aioredis.from_url(redis_srv.url)
    api = KubeClient.from_config(KubernetesConfig(kubeconfig=str(kube.handle.kubeconfig)))
    keys = TrackerKeys(test_id)
    observer = Observer(client, keys, api, args=MigrationControllerArgs())

    def reads() -> dict[str, int]:
        counted = kube.handle.call(lambda sim: dict(sim.api.requests_by_verb))
        return {verb: n for (_, verb, resource), n in counted.items() if resource == "reservations"}

    async def seen(job: PodMigrationJob) -> tuple[str | None, int, dict[str, int]]:
        """The current Reservation (the latest attempt), its attempt, and the requests it took."""
        before = reads()
        observed = await observer.observe(job)
        after = reads()
        delta = {verb: after.get(verb, 0) - before.get(verb, 0) for verb in after}
        current = observed.reservation.name if observed.reservation else None
        return current, observed.attempt, {verb: n for verb, n in delta.items() if n}

    try:
        await client.hset(keys.attempts, running.metadata.uid or "", 2)
        assert await seen(running) == ("running-2", 2, {"get": 2})  # one GET per attempt, no list

        await client.delete(keys.attempts)  # Redis forgot what was asked: the job's label finds them
        assert await seen(running) == ("running-2", 2, {"list": 1})

        # Never admitted, nothing asked: no Reservation of its own to look for.
        assert await seen(waiting) == (None, 0, {})
    finally:
        await client.aclose()
        await api.aclose()


async def test_a_pod_seen_gone_is_not_read_again_till_redis_forgets(
    kubesim_factory: Callable[..., SimHandle], redis_srv: Server, test_id: str
) -> None:
    kube = start(kubesim_factory, cluster())
    name = sorted(web_pods(kube))[0]
    job = make_job(kube, "moving", name, "Running")
    client = aioredis.from_url(redis_srv.url)
    api = KubeClient.from_config(KubernetesConfig(kubeconfig=str(kube.handle.kubeconfig)))
    keys = TrackerKeys(test_id)
    observer = Observer(client, keys, api, args=MigrationControllerArgs())

    def pod_reads() -> int:
        counted = kube.handle.call(lambda sim: dict(sim.api.requests_by_verb))
        return sum(n for (_, verb, resource), n in counted.items() if (verb, resource) == ("get", "pods"))

    async def seen() -> tuple[bool, int]:
        """Whether the job's pod is there, and the pod GETs it took to say so."""
        before = pod_reads()
        observed = await observer.observe(job)
        return observed.pod is not None, pod_reads() - before

    try:
        assert await seen() == (True, 1)
        kube.core.delete_namespaced_pod(name, "default", grace_period_seconds=0)
        assert await seen() == (False, 1)  # read once more: gone
        assert await seen() == (False, 0)  # a pod's uid never comes back: not read again
        await client.delete(keys.pods_gone)
        assert await seen() == (False, 1)
    finally:
        await client.aclose()
        await api.aclose()
