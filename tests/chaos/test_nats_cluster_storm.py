"""A storm of jobs through two replicas of each service on a three-node JetStream cluster (every stream and KV
bucket at replicas 3), with the leader of each stream (events, jobs, intents, audit) and of each KV bucket
(the watcher's checkpoints and leases) SIGKILLed in turn mid-storm, and then a node that leads nothing,
each restarted after: nothing lost, nothing doubled, no service stuck."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import msgspec
import nats
import pytest

from kubesim.sim import SimHandle
from podherd.harness.nats_cluster import NatsCluster
from podherd.harness.nats_faults import kill_every_leader, leader_of, raft_groups, server_named
from podherd.harness.servers import Server
from shared.config.model import nats_servers
from shared.nats import bus
from tests.e2e.pipeline import audit_order
from tests.e2e.storms import assert_each_job_moved_once, storm, storm_cluster, storm_config

# `make chaos` runs it beside the chaos run on the production topology (which kills the same leaders and a
# node with every invariant watched): the suite's time budget has no room for both in `make test`.
pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.slow, pytest.mark.full]


async def test_a_storm_through_leader_and_node_kills_of_a_jetstream_cluster_loses_and_doubles_nothing(
    kubesim_factory: Callable[..., SimHandle], nats_cluster: NatsCluster, redis_srv: Server, test_id: str
) -> None:
    kube = storm_cluster(kubesim_factory)
    base = storm_config(kube, Server("nats", nats_cluster.url, "cluster"), redis_srv, test_id)
    config = msgspec.structs.replace(base, nats=msgspec.structs.replace(base.nats, replicas=3))
    subjects = bus.Subjects(test_id)
    groups = raft_groups(subjects)
    nc = await nats.connect(nats_servers(nats_cluster.url))
    js = nc.jetstream()
    kills: list[int] = []
    idle: list[Server] = []

    async def leaders_then_a_node() -> None:
        kills.append(await kill_every_leader(js, nats_cluster, groups))
        leaders = {await leader_of(js, stream) for stream in groups}
        # A node leading nothing (when every node leads something: any).
        name = next(
            (f"podherd-n{i + 1}" for i in range(3) if f"podherd-n{i + 1}" not in leaders), "podherd-n1"
        )
        idle.append(server_named(nats_cluster, name))
        idle[0].kill()

    async def restart_idle() -> None:
        await asyncio.to_thread(nats_cluster.restart, idle[0])

    try:
        ran = await storm(kube, config, leaders_then_a_node, after=restart_idle)
    finally:
        await nc.close()
    assert 1 <= kills[0] <= len(groups)
    assert_each_job_moved_once(kube, ran)
    # The audit stream kept every job's ending, once (its records are de-duplicated by id).
    endings = [
        r.job or ""
        for r in await audit_order(nats_cluster.url, subjects)
        if r.action == "transition" and r.phase == "Succeeded"
    ]
    assert sorted(endings) == sorted(ran.final) and len(endings) == len(set(endings))
