"""Room an ended job kept for its siblings, once Redis has forgotten why (a flush): the tracker's sweep finds
it from the cluster alone. kubesim, NATS and Redis are real; the cleanup commands are read off the stream."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import nats
import pytest
import redis.asyncio as aioredis

from kubesim.sim import SimHandle
from podherd.harness.servers import Server
from services.executor.reservations import reservation_for
from services.tracker.service import Tracker
from shared.api.names import LABEL_CONTROLLER, LABEL_CREATED_BY, LABEL_JOB
from shared.api.pmj import PodMigrationJob
from shared.api.pod import pod_from
from shared.kube.client import KubeClient
from shared.nats import bus
from tests.e2e.pipeline import GROUP, PLURAL, VERSION, paused_job, pipeline_config
from tests.e2e.test_lifecycle import cluster, start, web_pods
from tests.kube import watch_until

pytestmark = [pytest.mark.integration]


def job(kube: Any, name: str, pod: str, phase: str | None) -> None:
    paused_job(kube, name, pod, {"phase": phase, "reason": "Timeout", "message": "ended"} if phase else None)


def room(kube: Any, pod: dict[str, Any], owner: str, controller: str) -> None:
    body = reservation_for(PodMigrationJob(), pod_from(pod), "5m")
    body["metadata"] = {
        "name": owner,
        "labels": {LABEL_CREATED_BY: "podherd", LABEL_JOB: owner, LABEL_CONTROLLER: controller},
    }
    kube.custom.create_cluster_custom_object(GROUP, VERSION, "reservations", body)


async def test_room_of_ended_jobs_is_swept_unless_a_sibling_is_in_flight(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    kube = start(kubesim_factory, cluster())
    pods = [kube.api.sanitize_for_serialization(p) for _, p in sorted(web_pods(kube).items())]
    job(kube, "alone", pods[0]["metadata"]["name"], "Failed")  # ended; nothing of its workload in flight
    job(kube, "kept", pods[1]["metadata"]["name"], "Failed")  # ended; a sibling is in flight
    job(kube, "sibling", pods[2]["metadata"]["name"], None)  # open
    room(kube, pods[0], "alone", "rs-a")
    room(kube, pods[1], "kept", "rs-b")
    room(kube, pods[2], "sibling", "rs-b")
    watch_until(  # scheduled: untaken room
        kube.custom.list_cluster_custom_object,
        lambda state: (
            all((r.get("status") or {}).get("phase") == "Available" for r in state.values())
            and len(state) == 3
        ),
        group=GROUP,
        version=VERSION,
        plural="reservations",
    )
    config = pipeline_config(kube.handle, nats_srv, redis_srv, test_id)
    nc = await nats.connect(nats_srv.url)
    subjects = bus.Subjects(test_id)
    await bus.ensure_work_streams(nc.jetstream(), subjects, config.nats)
    client = aioredis.from_url(redis_srv.url)
    api = KubeClient.from_config(config.kubernetes)
    sub = await nc.subscribe(f"{subjects.prefix}.jobs.cleanup.>")
    try:
        tracker = Tracker(config, nc, client, kube=api)
        await tracker.periodic.sweep_room()
        first = await drain(sub)
        # The open sibling ends: the room kept for it goes on the next sweep.
        kube.custom.patch_cluster_custom_object_status(
            GROUP, VERSION, PLURAL, "sibling", {"status": {"phase": "Aborted", "reason": "Aborted"}}
        )
        await tracker.periodic.sweep_room()
        second = await drain(sub)
    finally:
        await sub.unsubscribe()
        await nc.close()
        await client.aclose()
        await api.aclose()
    assert first == {"alone"}  # only the room no sibling needs
    assert second == {"alone", "kept", "sibling"}  # (no executor runs here: "alone" is still there)


async def drain(sub: Any) -> set[str]:
    """The jobs named by the cleanup commands published so far (the sweep publishes before it returns)."""
    names = set()
    while True:
        try:
            names.add(json.loads((await sub.next_msg(timeout=1)).data)["job"]["name"])
        except nats.errors.TimeoutError:
            return names
