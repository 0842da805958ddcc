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
from podherd.invariants import Watchdog
from podherd.nats_faults import kill_every_leader, kv_stream, leader_of, server_named
from podherd.servers import NatsCluster, Server
from shared import bus, redis_client
from shared.api import codec
from shared.api.messages import AuditRecord
from shared.config import nats_servers
from shared.kube import KubeClient
from tests.e2e.pipeline import GROUP, PLURAL, VERSION, create_job, ended, pipeline, pipeline_config
from tests.e2e.test_lifecycle import cluster, start, until_no_reservations, web_pods
from tests.e2e.test_pipeline import until_all_ended
from tests.kube import watch_until

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.slow]
JOBS = 30


async def test_a_storm_through_leader_and_node_kills_of_a_jetstream_cluster_loses_and_doubles_nothing(
    kubesim_factory: Callable[..., SimHandle], nats_cluster: NatsCluster, redis_srv: Server, test_id: str
) -> None:
    kube = start(kubesim_factory, cluster(nodes=12, web=JOBS, node_cpu=16, cpu="100m"))
    pods = sorted(web_pods(kube))
    broker = Server("nats", nats_cluster.url, "cluster")
    base = pipeline_config(
        kube.handle, broker, redis_srv, test_id, maxMigratingPerWorkload=8, maxUnavailablePerWorkload=8
    )
    config = msgspec.structs.replace(base, nats=msgspec.structs.replace(base.nats, replicas=3))
    subjects = bus.Subjects(test_id)
    groups = [
        subjects.events_stream,
        subjects.jobs_stream,
        subjects.intents_stream,
        subjects.audit_stream,
        kv_stream(subjects.watch_bucket),
        kv_stream(subjects.lease_bucket),
    ]
    redis = redis_client.connect(config.redis)
    watched = KubeClient.from_config(config.kubernetes)
    watchdog = Watchdog(watched, redis, test_id, args=config.migration_controller)
    stop = asyncio.Event()
    watching = asyncio.create_task(watchdog.run(stop))
    nc = await nats.connect(nats_servers(nats_cluster.url))
    js = nc.jetstream()
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
        kills = await kill_every_leader(js, nats_cluster, groups)
        leaders = {await leader_of(js, stream) for stream in groups}
        idle = next(
            (s for i, s in enumerate(nats_cluster.servers) if f"podherd-n{i + 1}" not in leaders), None
        )
        if idle is None:  # every node leads something: take any
            idle = server_named(nats_cluster, "podherd-n1")
        idle.kill()
        final = await until_all_ended(kube, JOBS)
        await asyncio.to_thread(nats_cluster.restart, idle)
        await asyncio.to_thread(until_no_reservations, kube)
    stop.set()
    findings = await watching
    ended_records = await _endings(js, subjects)
    await nc.close()
    await redis.aclose()
    await watched.aclose()
    assert 1 <= kills <= len(groups)
    phases = [j["status"]["phase"] for j in final.values()]
    assert phases.count("Succeeded") == JOBS, {p: phases.count(p) for p in set(phases)}
    replacements = {j["status"]["podRef"]["name"] for j in final.values()}
    live = web_pods(kube)
    assert len(replacements) == JOBS and replacements == set(live) and not set(pods) & set(live)
    assert findings.limits_exceeded == 0, (findings.slot_breaches, findings.workload_breaches)
    # The audit stream kept every job's ending, once (its records are de-duplicated by id).
    assert sorted(ended_records) == sorted(final) and len(ended_records) == len(set(ended_records))


async def _endings(js: nats.js.JetStreamContext, subjects: bus.Subjects) -> list[str]:
    """The job of every audit record of a job reaching Succeeded, in the stream."""
    info = await js.stream_info(subjects.audit_stream)
    sub = await js.subscribe(subjects.all_audit, ordered_consumer=True)
    found = []
    try:
        for _ in range(info.state.messages):
            record = codec.decode((await sub.next_msg(timeout=10)).data, AuditRecord)
            if record.action == "transition" and record.phase == "Succeeded":
                found.append(record.job or "")
    finally:
        await sub.unsubscribe()
    return found
