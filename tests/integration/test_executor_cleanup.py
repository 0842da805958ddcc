"""The executor's cleanup against kubesim: the attempts the tracker names are read by name (no list of
every Reservation), only Podherd's Reservations for the job go (never a user's by the same name), and an
unknown count falls back to listing the job's label."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import nats
import pytest

from kubesim.sim import SimHandle
from podherd.harness.servers import Server
from services.executor.reservations import reservation_for
from services.executor.service import Executor
from shared.api.names import LABEL_CREATED_BY, LABEL_JOB
from shared.api.pmj import PodMigrationJob
from shared.api.pod import pod_from
from shared.api.reservation import reservation_name
from shared.kube.client import KubeClient
from tests.e2e.pipeline import GROUP, VERSION, pipeline_config
from tests.e2e.test_lifecycle import cluster, reservations, start, web_pods

pytestmark = [pytest.mark.integration]


def room(kube: Any, pod: dict[str, Any], name: str, job: str | None) -> None:
    body = reservation_for(PodMigrationJob(), pod_from(pod), "5m")
    labels = {LABEL_CREATED_BY: "podherd", LABEL_JOB: job} if job else {"team": "theirs"}
    body["metadata"] = {"name": name, "labels": labels}
    kube.custom.create_cluster_custom_object(GROUP, VERSION, "reservations", body)


async def test_cleanup_reads_the_named_attempts_and_deletes_only_podherds(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    kube = start(kubesim_factory, cluster())
    pod = kube.api.sanitize_for_serialization(next(iter(web_pods(kube).values())))
    room(kube, pod, reservation_name("move", 1), "move")
    room(kube, pod, reservation_name("move", 2), "move")
    room(kube, pod, reservation_name("user", 1), None)  # the user's, named as Podherd would name it
    room(kube, pod, reservation_name("later", 1), "later")
    for kept in ("ended-1", "ended-2", "open"):  # room siblings kept, and one of a job still open
        room(kube, pod, reservation_name(kept, 1), kept)
    config = pipeline_config(kube.handle, nats_srv, redis_srv, test_id)
    client = KubeClient.from_config(config.kubernetes)
    nc = await nats.connect(nats_srv.url)
    executor = Executor(config, nc, client)

    def lists() -> int:
        asked = kube.handle.call(lambda sim: dict(sim.api.requests_by_verb))
        return int(asked.get(("kubernetes-admin", "list", "reservations"), 0))

    try:
        before = lists()
        await executor.cleanup("move", attempts=2)
        await executor.cleanup("user", attempts=1)
        assert lists() == before  # read by name
        left = {r["metadata"]["name"] for r in reservations(kube)}
        assert left == {reservation_name(j, 1) for j in ("user", "later", "ended-1", "ended-2", "open")}
        before = lists()
        await executor.cleanup("later")  # how many attempts is not known: listed by the job's label
        assert lists() == before + 1
        before = lists()
        await executor.cleanup("last", also=["ended-1", "ended-2"], attempts=1)  # the room they kept
        assert lists() == before + 1  # all of it in one list
        names = sorted(r["metadata"]["name"] for r in reservations(kube))
        assert names == sorted([reservation_name("user", 1), reservation_name("open", 1)])
    finally:
        await nc.close()
        await client.aclose()
