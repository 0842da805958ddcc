"""What the tracker reads to see a job's Reservations: each attempt it asked for by its name, and a list by
the job's label only when Redis no longer knows which attempts it asked for (a flush, a restart). kubesim
and Redis are real; kubesim counts the requests by verb."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import msgspec
import pytest
import redis.asyncio as aioredis

from kubesim.sim import SimHandle
from podherd.harness.servers import Server
from services.executor.reservations import reservation_for
from services.tracker.jobs.observer import Observer
from services.tracker.keys import TrackerKeys
from shared.api.names import LABEL_ATTEMPT, LABEL_CREATED_BY, LABEL_JOB
from shared.api.pmj import PodMigrationJob
from shared.api.pod import pod_from
from shared.api.reservation import reservation_name
from shared.config.model import KubernetesConfig, MigrationControllerArgs
from shared.kube.client import KubeClient
from shared.redis.durable import Durability
from tests.e2e.pipeline import GROUP, VERSION, paused_job
from tests.e2e.test_lifecycle import cluster, room_taken, start, web_pods
from tests.kube import Kube, watch_until

pytestmark = [pytest.mark.integration]


def single(client: Any) -> Durability:
    """One Redis: no replica to wait for."""
    return Durability(client, replicas=0, timeout=1.0, key="barrier")


def make_job(kube: Any, name: str, pod: str, phase: str | None) -> PodMigrationJob:
    status = {"phase": phase, "message": "reserving"} if phase else None
    return msgspec.convert(paused_job(kube, name, pod, status), PodMigrationJob)


def pod_reads(kube: Any) -> int:
    counted = kube.handle.call(lambda sim: dict(sim.api.requests_by_verb))
    return sum(n for (_, verb, resource), n in counted.items() if (verb, resource) == ("get", "pods"))


async def room_available(kube: Kube, reservation: str) -> None:
    await asyncio.to_thread(
        watch_until,
        kube.custom.list_cluster_custom_object,
        lambda state: (state.get(f"/{reservation}", {}).get("status") or {}).get("phase") == "Available",
        30,
        group=GROUP,
        version=VERSION,
        plural="reservations",
    )


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
    observer = Observer(client, keys, api, args=MigrationControllerArgs(), durability=single(client))

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
    observer = Observer(client, keys, api, args=MigrationControllerArgs(), durability=single(client))

    async def seen() -> tuple[bool, int]:
        """Whether the job's pod is there, and the pod GETs it took to say so."""
        before = pod_reads(kube)
        observed = await observer.observe(job)
        return observed.pod is not None, pod_reads(kube) - before

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


async def test_the_replacement_bound_in_the_jobs_own_room_is_read_once(
    kubesim_factory: Callable[..., SimHandle], redis_srv: Server, test_id: str
) -> None:
    kube = start(kubesim_factory, cluster())
    name, pod = sorted(web_pods(kube).items())[0]
    evicting = {
        "phase": "Running",
        "conditions": [{"type": "Eviction", "status": "True", "reason": "Evicting", "message": "evicting"}],
    }
    job = msgspec.convert(paused_job(kube, "moving", name, evicting), PodMigrationJob)
    make_room(kube, kube.api.sanitize_for_serialization(pod), "moving", 1)
    client = aioredis.from_url(redis_srv.url)
    api = KubeClient.from_config(KubernetesConfig(kubeconfig=str(kube.handle.kubeconfig)))
    keys = TrackerKeys(test_id)
    observer = Observer(client, keys, api, args=MigrationControllerArgs(), durability=single(client))
    try:
        await client.hset(keys.attempts, job.metadata.uid or "", 1)
        await room_available(kube, reservation_name("moving", 1))
        kube.core.delete_namespaced_pod(name, "default", grace_period_seconds=0)
        await room_taken(kube, reservation_name("moving", 1))  # by the pod its ReplicaSet made instead
        before = pod_reads(kube)
        observed = await observer.observe(job)
        assert observed.pod is None
        assert observed.replacement is not None and observed.replacement == observed.bound_pod
        assert observed.claimed == (
            observed.replacement.namespace,
            observed.replacement.name,
            observed.replacement.uid,
        )
        # The job's pod (gone), the replacement as the room's pod and the claim's candidate, and once more
        # after the claim: from the claim on its changes reconcile the job, so what it became in between
        # must be read (a replacement Ready just then would otherwise be waited for until a resync).
        assert pod_reads(kube) - before == 3
        before = pod_reads(kube)
        again = await observer.observe(job)
        assert again.claimed == observed.claimed
        # Claimed before: the replacement is read once (as the room's pod and the claimed replacement), beside
        # the job's pod (gone before this tracker ever saw it, so looked for again).
        assert pod_reads(kube) - before == 2
    finally:
        await client.aclose()
        await api.aclose()
