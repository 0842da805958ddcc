"""The arbitrator on real NATS and Redis, fed the events the watcher would publish.

Replicas run in this process as separate `Arbitrator` instances with their own connections; decisions are
read back from the jobs stream, limits from the ledger itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import nats
import pytest
import redis.asyncio as aioredis
from prometheus_client import REGISTRY

from podherd.harness.processes import ServiceProcess
from podherd.harness.servers import Server, spawn_logged
from services.arbitrator import engine as engine_module
from services.arbitrator.candidates import Prepared
from services.arbitrator.decisions import Decisions
from services.arbitrator.keys import ArbitratorKeys
from services.arbitrator.service import Arbitrator
from shared.api import codec
from shared.api.messages import (
    EventType,
    ObjectEvent,
    PdbInfo,
    PodInfo,
    SlotsReleased,
    WatchedKind,
    WorkloadInfo,
    WorkloadRef,
)
from shared.api.meta import ObjectMeta, ObjectReference
from shared.api.names import ANNOTATION_DRAIN_NODE
from shared.api.pmj import PodMigrationJob, PodMigrationJobSpec
from shared.config.loader import config_from_dict
from shared.config.model import PodherdConfig
from shared.ledger.store import Candidate, Ledger, Verdict
from shared.nats import bus
from shared.nats.publisher import Publisher
from shared.redis import client as redis_client
from tests.polling import until

pytestmark = pytest.mark.integration
EPOCH = datetime(2026, 11, 1, tzinfo=UTC)


def arbitrator_config(
    nats_srv: Server, redis_srv: Server, prefix: str, replica: str = "a1", **migration: Any
) -> PodherdConfig:
    return config_from_dict(
        {
            "nats": {"url": nats_srv.url, "subjectPrefix": prefix},
            "redis": {"url": redis_srv.url, "keyPrefix": prefix},
            "replica": replica,
            "migrationController": {
                "evictQPS": 10_000,
                "evictBurst": 10_000,
                "objectLimiters": {"workload": {"duration": "1s", "maxMigrating": 10_000, "burst": 10_000}},
                **migration,
            },
        }
    )


def replicas_config(
    nats_srv: Server, redis_srv: Server, prefix: str, count: int, **migration: Any
) -> list[PodherdConfig]:
    return [
        arbitrator_config(nats_srv, redis_srv, prefix, replica=f"a{i}", **migration) for i in range(count)
    ]


class Cluster:
    """Publishes watcher-shaped events for pods, workloads, budgets and jobs."""

    def __init__(self, js: Any, subjects: bus.Subjects) -> None:
        self.js = js
        self.subjects = subjects
        self.rv = 0
        self.replicas: dict[str, int] = {}  # deployment -> replicas
        self.kinds: dict[str, str] = {}  # workload -> its kind, where not a Deployment
        self.pods: Counter[str] = Counter()  # deployment -> pods published

    async def _event(
        self,
        kind: WatchedKind | str,
        plural: str,
        namespace: str | None,
        name: str,
        uid: str,
        obj: Any,
        event_type: EventType = "ADDED",
    ) -> None:
        self.rv += 1
        event = ObjectEvent(
            kind=kind,
            type=event_type,
            name=name,
            uid=uid,
            resource_version=str(self.rv),
            namespace=namespace,
            observed_at=datetime.now(UTC),
            object=obj,
        )
        await self.js.publish(
            self.subjects.event(plural, namespace, name),
            codec.encode(event),
            headers={"Nats-Msg-Id": f"{uid}/{self.rv}"},
        )

    async def deployment(self, name: str, replicas: int, kind: str = "Deployment") -> None:
        """A Deployment, or a workload of a configured `kind` (on the configured kinds' subjects)."""
        self.replicas[name] = replicas
        self.kinds[name] = kind
        info = WorkloadInfo(
            uid=f"d-{name}",
            kind=kind,
            namespace="default",
            name=name,
            replicas=replicas,
            ready_replicas=replicas,
            available_replicas=replicas,
        )
        topic = "deployments" if kind == "Deployment" else f"{bus.WORKLOADS}.{bus.token(kind)}"
        await self._event(kind, topic, "default", name, info.uid, info)

    async def pod(
        self, name: str, node: str, workload: str, kind: str = "Deployment", **extra: Any
    ) -> PodInfo:
        info = PodInfo(
            uid=f"p-{name}",
            namespace="default",
            name=name,
            node_name=node,
            phase="Running",
            ready=True,
            owner=ObjectReference(kind="ReplicaSet", name=f"{workload}-rs", uid=f"rs-{workload}"),
            workload=WorkloadRef(kind=kind, namespace="default", name=workload),
            scheduler_name="koord-scheduler",
            labels={"app": workload},
            **extra,
        )
        await self._event("Pod", "pods", "default", name, info.uid, info)
        self.pods[workload] += 1
        return info

    async def other_replicas(self) -> None:
        """The rest of each deployment's replicas, Ready on a node of their own, as a real cluster has them
        (the arbitrator counts a workload's unavailable replicas from its pods)."""
        for workload, replicas in self.replicas.items():
            for i in range(self.pods[workload], replicas):
                await self.pod(f"{workload}-other-{i}", "node-other", workload, self.kinds[workload])

    async def pdb(self, name: str, app: str, allowed: int) -> None:
        info = PdbInfo(
            uid=f"pdb-{name}",
            namespace="default",
            name=name,
            selector={"app": app},
            disruptions_allowed=allowed,
        )
        await self._event("PodDisruptionBudget", "poddisruptionbudgets", "default", name, info.uid, info)

    async def job(
        self,
        name: str,
        pod: str,
        priority: int = 0,
        created: int = 0,
        event_type: EventType = "ADDED",
        uid: str | None = None,
        annotations: dict[str, str] | None = None,
        **spec: Any,
    ) -> None:
        job = PodMigrationJob(
            api_version="scheduling.koordinator.sh/v1alpha1",
            kind="PodMigrationJob",
            metadata=ObjectMeta(
                name=name,
                uid=uid or f"u-{name}",
                creation_timestamp=EPOCH + timedelta(seconds=created),
                annotations={"podherd.io/migration-priority": str(priority), **(annotations or {})},
            ),
            spec=PodMigrationJobSpec(pod_ref=ObjectReference(namespace="default", name=pod), **spec),
        )
        await self._event(
            "PodMigrationJob", "podmigrationjobs", None, name, uid or f"u-{name}", job, event_type
        )


@contextlib.asynccontextmanager
async def arbitrators(configs: list[PodherdConfig]) -> AsyncIterator[list[Arbitrator]]:
    stop = asyncio.Event()
    running: list[tuple[Arbitrator, Any, aioredis.Redis, asyncio.Task[None]]] = []
    for config in configs:
        nc = await nats.connect(config.nats.url)
        client = aioredis.from_url(config.redis.url)
        arbitrator = Arbitrator(config, nc, client, kube=None)
        running.append((arbitrator, nc, client, asyncio.create_task(arbitrator.run(stop))))
    try:
        yield [r[0] for r in running]
    finally:
        stop.set()
        for _arbitrator, nc, client, task in running:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(10):
                    await task
            await nc.close()
            await client.aclose()


def arbitrator_env(
    nats_srv: Server, redis_srv: Server, prefix: str, tmp_path: Any, **migration: str
) -> dict[str, str]:
    """The environment of `podherd run arbitrator` processes on these servers, `migration` its
    migrationController settings (PODHERD_MIGRATIONCONTROLLER__<KEY>)."""
    return {
        **os.environ,
        "NATS_URL": nats_srv.url,
        "REDIS_URL": redis_srv.url,
        "PODHERD_CONFIG": "",
        "PODHERD_NATS__SUBJECTPREFIX": prefix,
        "PODHERD_REDIS__KEYPREFIX": prefix,
        "PODHERD_HTTP__PORT": "0",
        "PODHERD_NATS__ACKWAIT": "2s",
        "PODHERD_LOGGING__FORMAT": "text",
        **{f"PODHERD_MIGRATIONCONTROLLER__{key}": value for key, value in migration.items()},
        "KUBECONFIG": str(tmp_path / "none"),
    }


def arbitrator_processes(env: dict[str, str], tmp_path: Any, count: int) -> list[subprocess.Popen[bytes]]:
    """`count` replicas of `podherd run arbitrator` (`a0`, `a1`, ...), each logging to `<name>.log`."""
    argv = [sys.executable, "-m", "podherd", "run", "arbitrator"]
    return [
        spawn_logged(argv, tmp_path / f"a{i}.log", env={**env, "PODHERD_REPLICA": f"a{i}"})
        for i in range(count)
    ]


async def passes_after(count: int, within: float = 15.0) -> None:
    """Until the arbitrators in this process have made `count` more admission passes (a pass that began
    before this call ends among them: one whole pass needs two)."""

    def passes() -> float:
        return REGISTRY.get_sample_value("podherd_arbitrator_pass_seconds_count") or 0.0

    target = passes() + count
    # A metric, read again: a pass tells no one it ended.
    await until(lambda: passes() >= target, within=within, what=f"{count} arbitration passes")


async def follow(
    nc: Any,
    subject: str,
    predicate: Callable[[list[dict[str, Any]]], bool],
    within: float = 15.0,
    keep: Callable[[dict[str, Any]], bool] = lambda _: True,
) -> list[dict[str, Any]]:
    """Read `subject` on JetStream from the start until `predicate(messages so far that it keeps)` holds."""
    sub = await nc.jetstream().subscribe(subject, ordered_consumer=True)
    seen: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    try:
        while not predicate(seen):
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError(f"not met on {subject}; so far: {seen[-5:]}")
            with contextlib.suppress(TimeoutError, nats.errors.TimeoutError):
                message = json.loads((await sub.next_msg(timeout=min(1.0, remaining))).data)
                if keep(message):
                    seen.append(message)
        return seen
    finally:
        await sub.unsubscribe()


async def decisions(
    nc: Any, subjects: bus.Subjects, predicate: Callable[[list[dict[str, Any]]], bool], within: float = 15.0
) -> list[dict[str, Any]]:
    """The admissions and rejections (what the tracker is told a job waits for is left out)."""
    return await follow(
        nc, f"{subjects.prefix}.jobs.>", predicate, within, keep=lambda d: d.get("decision") != "deferred"
    )


def admitted(ds: list[dict[str, Any]]) -> list[str]:
    return [d["job"]["name"] for d in ds if d["decision"] == "admitted"]


async def setup_cluster(config: PodherdConfig) -> tuple[Any, bus.Subjects, Cluster]:
    nc = await nats.connect(config.nats.url)
    js = nc.jetstream()
    subjects = bus.Subjects(config.nats.subject_prefix)
    await bus.ensure_events_stream(js, subjects, config.nats)
    await bus.ensure_work_streams(js, subjects, config.nats)
    return nc, subjects, Cluster(js, subjects)


async def release(config: PodherdConfig, nc: Any, subjects: bus.Subjects, job_uid: str) -> bool:
    from shared.ledger.store import Ledger

    client = aioredis.from_url(config.redis.url)
    try:
        released = await Ledger(client, config.redis.key_prefix, 600).release(job_uid)
    finally:
        await client.aclose()
    await nc.publish(subjects.ledger_released, codec.encode(SlotsReleased(job_uid=job_uid)))
    return released


# ---------------------------------------------------------------------------------------------------------


async def test_seed_001_three_replicas_one_at_a_time_event_driven(
    nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    config = arbitrator_config(nats_srv, redis_srv, test_id)
    nc, subjects, cluster = await setup_cluster(config)
    await cluster.deployment("web", 3)
    for i in range(3):
        await cluster.pod(f"web-{i}", f"node-{i}", "web")
    async with arbitrators([config]):
        await cluster.job("j0", "web-0", created=0)
        await cluster.job("j1", "web-1", created=1)
        first = await decisions(nc, subjects, lambda ds: len(admitted(ds)) == 1)
        assert admitted(first) == ["j0"]  # GetMaxMigrating(3) = 1: the older job first
        assert first[0]["slots"] and "workload:Deployment/default/web" in first[0]["slots"]
        # A released slot wakes the arbitrator at once (no 500 ms round needed).
        assert await release(config, nc, subjects, "u-j0")
        later = await decisions(nc, subjects, lambda ds: admitted(ds) == ["j0", "j1"])
        assert [d["decision"] for d in later] == ["admitted", "admitted"]
    await nc.close()


class Crash(BaseException):
    """The process dies here (as SIGKILL would: nothing after it runs)."""


async def test_an_admission_taken_by_a_replica_that_died_before_telling_it_is_told_by_another(
    nats_srv: Server, redis_srv: Server, test_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The admission script took the job off the queue and recorded its outcome; the replica died before
    # publishing the decision. Another replica publishes it once the outcome is ANNOUNCE_AFTER old.
    monkeypatch.setattr(engine_module, "ANNOUNCE_AFTER", 0.5)
    config = arbitrator_config(nats_srv, redis_srv, test_id)
    nc, subjects, cluster = await setup_cluster(config)
    await cluster.deployment("web", 3)
    await cluster.pod("web-0", "node-0", "web")
    await cluster.other_replicas()
    took = asyncio.Event()

    async def dies_before_telling(name: str, candidate: Any, since: float | None, **_: Any) -> None:
        took.set()
        raise Crash

    doomed_nc, doomed_redis = await nats.connect(nats_srv.url), aioredis.from_url(redis_srv.url)
    doomed = Arbitrator(config, doomed_nc, doomed_redis, kube=None)
    doomed.engine.decisions.admitted = dies_before_telling  # type: ignore[method-assign]
    dying = asyncio.create_task(doomed.run(asyncio.Event()))
    await cluster.job("j0", "web-0", created=0)
    async with asyncio.timeout(15):
        await took.wait()
    finished, _ = await asyncio.wait([dying], timeout=15)
    assert finished and isinstance(dying.exception(), BaseExceptionGroup | Crash)
    await doomed_nc.close()
    await doomed_redis.aclose()
    async with arbitrators([config]):
        told = await decisions(nc, subjects, lambda ds: admitted(ds) == ["j0"])
    assert told[0]["slots"] and "workload:Deployment/default/web" in told[0]["slots"]
    await nc.close()


async def test_default_workload_limiter_spaces_migrations(
    nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    # Koordinator's default objectLimiters {workload: {duration: 5m}}: GetMaxMigrating(3) = 1 per 5 minutes,
    # charged at admission (Koordinator #2074): a freed slot is not enough.
    config = arbitrator_config(nats_srv, redis_srv, test_id, objectLimiters={})
    nc, subjects, cluster = await setup_cluster(config)
    await cluster.deployment("web", 3)
    for i in range(2):
        await cluster.pod(f"web-{i}", f"node-{i}", "web")
    await cluster.other_replicas()
    async with arbitrators([config]):
        await cluster.job("j0", "web-0", created=0)
        await cluster.job("j1", "web-1", created=1)
        await decisions(nc, subjects, lambda ds: admitted(ds) == ["j0"])
        assert await release(config, nc, subjects, "u-j0")
        audit = await _audit_until(
            nc, subjects, lambda rs: any(r.get("rule") == "objectLimiters.workload" for r in rs)
        )
    deferral = next(r for r in audit if r.get("rule") == "objectLimiters.workload")
    assert deferral["job"] == "j1" and "exhausted for workload Deployment/default/web" in deferral["message"]
    await nc.close()


async def test_a_deferral_is_audited_once_per_rule_and_holder(
    nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    config = arbitrator_config(nats_srv, redis_srv, test_id)
    nc, subjects, _cluster = await setup_cluster(config)
    client = aioredis.from_url(config.redis.url)
    ledger = Ledger(client, config.redis.key_prefix, 600)
    publisher = Publisher(nc)
    told = Decisions(
        ledger,
        ArbitratorKeys(config.redis.key_prefix),
        publisher,
        durability=redis_client.durability(client, config.redis),
        replica="a1",
        subject=subjects.job,
        audit_subject=subjects.audit,
    )
    waiting = Prepared(Candidate("u-j1", "p-1", (), ()), "j1", 0.0)
    limiter, bucket = "objectLimiters.workload", "bucket:workload-limiter:web"
    exhausted = "deferred: objectLimiters.workload exhausted for workload web (next token in {:.2f}s)"
    node_full = Verdict(
        "deferred", "maxMigratingPerNode", "deferred: maxMigratingPerNode 1/1 on node a", "slot:node:a"
    )
    for seconds in (599.5, 599.0, 598.5):  # looked at again and again: only the countdown changed
        await told.deferred([(waiting, Verdict("deferred", limiter, exhausted.format(seconds), bucket))])
    await told.deferred([(waiting, node_full)])  # held by something else now
    await told.deferred([(waiting, node_full)])
    await told.deferred(
        [(waiting, Verdict("deferred", limiter, exhausted.format(10.0), bucket))]
    )  # back again
    await publisher.flush()  # every record published so far is in the stream
    stream = await nc.jetstream().stream_info(subjects.audit_stream)
    assert stream.state.messages == 3
    records = await _audit_until(nc, subjects, lambda rs: len(rs) == 3)
    assert [(r["rule"], r["details"]["waitingOn"]) for r in records] == [
        (limiter, bucket),
        ("maxMigratingPerNode", "slot:node:a"),
        (limiter, bucket),
    ]
    assert records[0]["message"] == exhausted.format(599.5)
    # The tracker is told each change too (it writes the wait into the job's status), without the countdown.
    told_tracker = await nc.jetstream().stream_info(
        subjects.jobs_stream, subjects_filter=subjects.job("deferred", "j1")
    )
    assert told_tracker.state.messages == 3
    await client.aclose()
    await nc.close()


async def _audit_until(
    nc: Any, subjects: bus.Subjects, predicate: Callable[[list[dict[str, Any]]], bool], within: float = 15.0
) -> list[dict[str, Any]]:
    return await follow(nc, f"{subjects.prefix}.audit.>", predicate, within)


async def test_filters_reject_and_a_pod_the_facts_do_not_know_waits_until_it_is_known(
    nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    config = arbitrator_config(nats_srv, redis_srv, test_id)
    nc, subjects, cluster = await setup_cluster(config)
    await cluster.deployment("web", 10)
    await cluster.pod(
        "precious", "node-1", "web", annotations={"scheduling.koordinator.sh/eviction-cost": "2147483647"}
    )
    await cluster.other_replicas()
    async with arbitrators([config]):
        await cluster.job("never", "precious")
        await cluster.job("ghost", "no-such-pod")
        await cluster.job("invalid", "")
        ds = await decisions(nc, subjects, lambda ds: len(ds) >= 2)
        # A pod the facts do not know (yet: a watcher restarting, Redis restored) never fails the job here;
        # it waits, and says so. The tracker, reading the pod itself, fails it MissingPod if it is gone.
        audit = await _audit_until(nc, subjects, lambda rs: any(r.get("job") == "ghost" for r in rs))
        assert "ghost" not in {d["job"]["name"] for d in ds}
        # Its pod's event comes after all: the job is admitted.
        await cluster.pod("no-such-pod", "node-2", "web")
        ds = await decisions(nc, subjects, lambda ds: any(d["job"]["name"] == "ghost" for d in ds))
    by_name = {d["job"]["name"]: d for d in ds}
    assert by_name["ghost"]["decision"] == "admitted", by_name["ghost"]
    waiting = next(r for r in audit if r.get("job") == "ghost")
    assert (waiting["rule"], waiting["message"]) == ("WaitingForFacts", "waiting for pod default/no-such-pod")
    assert (by_name["never"]["decision"], by_name["never"]["reason"], by_name["never"]["rule"]) == (
        "rejected",
        "ForbiddenMigratePod",
        "podherd.io/EvictionCost",
    )
    assert by_name["invalid"]["reason"] == "InvalidPodRef"
    await nc.close()


async def test_workload_limits_hold_for_a_configured_kind_and_a_kind_without_replicas_is_refused(
    nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    clonesets = {"kind": "CloneSet", "group": "apps.kruise.io", "resource": "clonesets"}
    config = arbitrator_config(nats_srv, redis_srv, test_id)
    config.watcher.workload_kinds = config_from_dict(
        {"watcher": {"workloadKinds": [clonesets]}}
    ).watcher.workload_kinds
    nc, subjects, cluster = await setup_cluster(config)
    shop = "CloneSet.apps.kruise.io"
    await cluster.deployment("shop", 3, kind=shop)
    for i in range(2):
        await cluster.pod(f"shop-{i}", f"node-{i}", "shop", kind=shop)
    await cluster.other_replicas()
    await cluster.pod("report", "node-3", "nightly", kind="Job")
    await cluster.pod("drained", "node-3", "nightly-2", kind="Job")
    async with arbitrators([config]):
        for i in range(2):
            await cluster.job(f"j{i}", f"shop-{i}", created=i)
        await cluster.job("batch", "report")
        # A drain's job counts as kubectl drain counts it: under its budgets alone.
        await cluster.job("drain", "drained", annotations={ANNOTATION_DRAIN_NODE: "node-3"})
        ds = await decisions(nc, subjects, lambda ds: len(ds) >= 3)
        audit = await _audit_until(
            nc, subjects, lambda rs: any(r.get("job") == "j1" and r.get("rule") for r in rs)
        )
    by_name = {d["job"]["name"]: d for d in ds}
    assert sorted(admitted(ds)) == ["drain", "j0"]
    deferral = next(r for r in audit if r.get("job") == "j1" and r.get("rule"))
    assert deferral["rule"] in ("maxMigratingPerWorkload", "maxUnavailablePerWorkload"), deferral
    assert f"workload {shop}/default/shop" in deferral["message"] and "1/1" in deferral["message"], deferral
    batch = by_name["batch"]
    assert (batch["decision"], batch["rule"]) == ("rejected", "ExpectedReplicas")
    assert "workload Job/default/nightly expects no replicas" in batch["message"]
    await nc.close()


async def test_a_workload_limit_set_to_zero_is_one(nats_srv: Server, redis_srv: Server, test_id: str) -> None:
    # "0%" of 50 replicas is 0, and a value set that comes to 0 is 1 (Koordinator's GetMaxUnavailable): not
    # the default (10% of 50 = 5), and not "nothing, ever".
    config = arbitrator_config(
        nats_srv, redis_srv, test_id, maxMigratingPerWorkload="0%", maxUnavailablePerWorkload="0%"
    )
    nc, subjects, cluster = await setup_cluster(config)
    await cluster.deployment("web", 50)
    for i in range(3):
        await cluster.pod(f"web-{i}", f"node-{i}", "web")
    await cluster.other_replicas()
    async with arbitrators([config]):
        for i in range(3):
            await cluster.job(f"j{i}", f"web-{i}", created=i)
        ds = await decisions(nc, subjects, lambda ds: len(admitted(ds)) == 1)
        audit = await _audit_until(
            nc,
            subjects,
            lambda rs: all(any(r.get("job") == f"j{i}" and r.get("rule") for r in rs) for i in (1, 2)),
        )
    assert admitted(ds) == ["j0"]
    for i in (1, 2):
        deferral = next(r for r in audit if r.get("job") == f"j{i}" and r.get("rule"))
        assert deferral["rule"] in ("maxMigratingPerWorkload", "maxUnavailablePerWorkload"), deferral
        assert "1/1" in deferral["message"], deferral
    await nc.close()


async def test_a_workload_limit_above_its_replicas_is_capped_and_refused(
    nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    # "150%" of 6 replicas is capped at 6: a migration could take all of them, so the job is refused.
    config = arbitrator_config(nats_srv, redis_srv, test_id, maxUnavailablePerWorkload="150%")
    nc, subjects, cluster = await setup_cluster(config)
    await cluster.deployment("six", 6)
    await cluster.pod("six-0", "node-0", "six")
    async with arbitrators([config]):
        await cluster.job("all-of-them", "six-0")
        ds = await decisions(nc, subjects, lambda ds: len(ds) >= 1)
    assert (ds[0]["decision"], ds[0]["reason"], ds[0]["rule"]) == (
        "rejected",
        "ForbiddenMigratePod",
        "ExpectedReplicas",
    )
    assert "has 6 replicas and may lose 6 at once" in ds[0]["message"]
    await nc.close()


async def test_pdb_and_node_limits(nats_srv: Server, redis_srv: Server, test_id: str) -> None:
    config = arbitrator_config(
        nats_srv, redis_srv, test_id, maxMigratingPerWorkload=10, maxUnavailablePerWorkload=10
    )
    nc, subjects, cluster = await setup_cluster(config)
    await cluster.deployment("web", 20)
    await cluster.deployment("api", 20)
    await cluster.pdb("web", "web", allowed=1)
    for i in range(3):
        await cluster.pod(f"web-{i}", f"node-{i}", "web")
        await cluster.pod(f"api-{i}", "node-9", "api")
    await cluster.other_replicas()
    async with arbitrators([config]):
        for i in range(3):
            await cluster.job(f"web-job-{i}", f"web-{i}", created=i)
            await cluster.job(f"api-job-{i}", f"api-{i}", created=10 + i)
        ds = await decisions(nc, subjects, lambda ds: len(admitted(ds)) >= 3)
        await passes_after(2)  # a whole pass since: nothing else may be admitted
        ds = await decisions(nc, subjects, lambda d: len(d) >= len(ds))
    assert sorted(admitted(ds)) == ["api-job-0", "api-job-1", "web-job-0"]  # PDB allows 1; node-9 allows 2
    await nc.close()


async def test_four_replicas_admit_in_global_order_within_limits(
    nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    # 400 jobs with distinct migration priorities (more than a round reads, `arbitrator.scanDepth` 256)
    # compete for maxMigratingGlobally=10. In every wave the ten admitted must be exactly the ten best still
    # waiting, whichever replica admitted them.
    configs = replicas_config(
        nats_srv,
        redis_srv,
        test_id,
        4,
        maxMigratingGlobally=10,
        maxMigratingPerNode=0,
        # The workload limits open: every replica may go (skipCheckExpectedReplicas lets a limit that
        # equals the replica count through).
        maxMigratingPerWorkload="100%",
        maxUnavailablePerWorkload="100%",
        skipCheckExpectedReplicas=True,
    )
    nc, subjects, cluster = await setup_cluster(configs[0])
    jobs = 400
    await cluster.deployment("big", jobs)
    for i in range(jobs):
        await cluster.pod(f"p{i}", f"node-{i % 40}", "big")
    priorities = list(range(jobs))
    import random

    random.Random(7).shuffle(priorities)
    from shared.ledger.slots import Slot
    from shared.ledger.store import Ledger

    client = aioredis.from_url(configs[0].redis.url)
    ledger = Ledger(client, test_id, 600)
    await ledger.completeness.rebuild([])
    blockers = [f"blocker-{i}" for i in range(10)]
    for blocker in blockers:  # the room is full while the queue fills, so every job waits together
        assert (
            await ledger.admit(
                blocker, blocker, [Slot("maxMigratingGlobally", "global", 10, "c")], buckets=[]
            )
        ).admitted
    async with arbitrators(configs):
        for i, priority in enumerate(priorities):
            await cluster.job(f"j{i}", f"p{i}", priority=priority, created=i)

        async def all_parked() -> bool:
            return sum(gate == "slot:global" for gate in (await ledger.queue.parked()).values()) >= jobs

        # Every job waits on the full global slot (none still on a timer for its facts) before room opens.
        await until(all_parked, within=60, what="every job parked on the global slot")
        for blocker in blockers:
            assert await release(configs[0], nc, subjects, blocker)
        waiting = {f"j{i}": p for i, p in enumerate(priorities)}
        seen = 0
        for _wave in range(8):

            def ten_more(ds: list[dict[str, Any]], n: int = seen + 10) -> bool:
                return len(admitted(ds)) >= n

            ds = await decisions(nc, subjects, ten_more, within=30)
            wave = admitted(ds)[seen : seen + 10]
            best = sorted(waiting, key=lambda j: -waiting[j])[:10]
            assert sorted(wave) == sorted(best)
            members = await client.smembers(f"{{{test_id}}}:ledger:slots:global")  # the ledger itself
            assert len(members) <= 10
            for job in wave:
                waiting.pop(job)
                assert await release(configs[0], nc, subjects, f"u-{job}")
            seen += 10
        await client.aclose()
    await nc.close()


async def test_flush_closes_admission_until_rebuilt_from_running_jobs(
    nats_srv: Server, redis_srv: Server, test_id: str, kubesim_factory: Callable[..., Any], tmp_path: Any
) -> None:
    from shared.kube.client import KubeClient
    from shared.ledger.store import Ledger
    from tests.kube import client_for, with_crds

    handle = kubesim_factory()
    kube_api = with_crds(client_for(handle))
    config = arbitrator_config(nats_srv, redis_srv, test_id, maxMigratingPerNode=1)
    nc, subjects, cluster = await setup_cluster(config)
    await cluster.deployment("web", 10)
    for i in range(3):
        await cluster.pod(f"web-{i}", "node-1" if i < 2 else "node-2", "web")
    await cluster.other_replicas()
    client = aioredis.from_url(config.redis.url)
    ledger = Ledger(client, test_id, 600)
    async with arbitrators([config]) as (arbitrator,):
        arbitrator.rebuild.kube = KubeClient.from_config(
            config_from_dict({"kubernetes": {"kubeconfig": str(handle.kubeconfig)}}).kubernetes
        )
        group, version = "scheduling.koordinator.sh", "v1alpha1"
        created = kube_api.custom.create_cluster_custom_object(
            group,
            version,
            "podmigrationjobs",
            {
                "apiVersion": f"{group}/{version}",
                "kind": "PodMigrationJob",
                "metadata": {"name": "j0"},
                "spec": {"podRef": {"namespace": "default", "name": "web-0"}},
            },
        )
        uid = created["metadata"]["uid"]
        await cluster.job("j0", "web-0", created=0, uid=uid)
        [decision] = await decisions(nc, subjects, lambda ds: len(admitted(ds)) == 1)
        before = await ledger.snapshot()
        # What the tracker does when the job starts: Running, with the pod and slots it holds on the PMJ.
        kube_api.custom.patch_cluster_custom_object(
            group,
            version,
            "podmigrationjobs",
            "j0",
            {
                "metadata": {
                    "annotations": {
                        "podherd.io/ledger": json.dumps({"pod": "p-web-0", "slots": decision["slots"]})
                    }
                }
            },
        )
        kube_api.custom.patch_cluster_custom_object_status(
            group, version, "podmigrationjobs", "j0", {"status": {"phase": "Running"}}
        )
        real = arbitrator.rebuild.kube
        from kubesim.sim import write_kubeconfig

        nowhere = write_kubeconfig("http://127.0.0.1:9", tmp_path / "nowhere.kubeconfig", "unused")
        unreachable = KubeClient.from_config(
            config_from_dict({"kubernetes": {"kubeconfig": str(nowhere)}}).kubernetes
        )
        arbitrator.rebuild.kube = unreachable  # the API server is unreachable: rebuilds fail
        await cluster.job("j1", "web-1", created=1)  # same node as j0: waits for j0's slot
        await _audit_until(nc, subjects, lambda rs: any(r["job"] == "j1" for r in rs))
        keys = [k async for k in client.scan_iter(match=f"*{test_id}*")]
        await client.delete(*keys)  # Redis loses everything: ledger, queue, facts
        await cluster.job("j2", "web-2", created=2)  # other node: would fit, but the ledger is closed
        # Two arbitration rounds after it, each closed: the rebuild each tries fails on the API server.
        failed = arbitrator.api_down.failures
        # A count, no event for it.
        await until(lambda: arbitrator.api_down.failures >= failed + 2, within=30, what="two failed rebuilds")
        assert not await ledger.completeness.is_complete()
        assert admitted(await decisions(nc, subjects, lambda ds: len(ds) >= 1)) == ["j0"]
        arbitrator.rebuild.kube = real  # the API server is back: the next round rebuilds
        later = await decisions(nc, subjects, lambda ds: "j2" in admitted(ds))
        # j1 still waits behind the rebuilt node slot of j0. (j0 may be told again: the stream still shows it
        # Pending, so it is queued and found already admitted; a new ledger generation makes that a new
        # message, which the tracker takes as a no-op for a Running job.)
        assert sorted(set(admitted(later))) == ["j0", "j2"] and admitted(later).count("j2") == 1
        rebuilt = await ledger.snapshot()
        assert rebuilt["claims"]["p-web-0"] == uid
        # The facts and the pending job came back from the events stream: j1 waits on j0's node again.
        assert (await ledger.queue.parked()).get("u-j1") == "slot:node:node-1"
        # j0's slots are exactly what they were (j2, admitted since, may share some of the sets).
        assert {k: [uid] for k, v in rebuilt["slots"].items() if uid in v} == before["slots"]
    for kube in (real, unreachable):
        await kube.aclose()
    await client.aclose()
    await nc.close()


async def test_killing_a_replica_mid_stream_loses_no_job(
    nats_srv: Server, redis_srv: Server, test_id: str, tmp_path: Any
) -> None:
    import signal

    config = arbitrator_config(
        nats_srv,
        redis_srv,
        test_id,
        maxMigratingPerNode=0,
        maxMigratingPerWorkload="100%",  # open, as the processes below are told too
        maxUnavailablePerWorkload="100%",
        skipCheckExpectedReplicas=True,
    )
    nc, subjects, cluster = await setup_cluster(config)
    await cluster.deployment("big", 300)
    for i in range(300):
        await cluster.pod(f"p{i}", f"node-{i % 30}", "big")
    env = arbitrator_env(
        nats_srv,
        redis_srv,
        test_id,
        tmp_path,
        EVICTQPS="100000",
        EVICTBURST="100000",
        MAXMIGRATINGPERNODE="0",
        MAXMIGRATINGPERWORKLOAD="100%",
        MAXUNAVAILABLEPERWORKLOAD="100%",
        SKIPCHECKEXPECTEDREPLICAS="true",
        OBJECTLIMITERS="{workload: {duration: 1s, maxMigrating: 100000, burst: 100000}}",
    )
    procs = arbitrator_processes(env, tmp_path, 3)
    replicas = [
        ServiceProcess("arbitrator", f"a{i}", proc, tmp_path / f"a{i}.log") for i, proc in enumerate(procs)
    ]
    try:
        # Every replica up before the storm: one still importing when SIGTERM comes dies of it (-15).

        async def all_ready() -> bool:
            assert all(r.alive() for r in replicas), [r.tail() for r in replicas]
            return all(await asyncio.gather(*(asyncio.to_thread(r.ready) for r in replicas)))

        # A process's readiness is polled: no event crosses to it.
        await until(all_ready, within=60, what="every arbitrator ready", every=0.1)
        for i in range(150):
            await cluster.job(f"j{i}", f"p{i}", created=i)
        await decisions(nc, subjects, lambda ds: len(admitted(ds)) >= 20, within=30)
        procs[0].send_signal(
            signal.SIGKILL
        )  # mid-stream: whatever it had fetched is redelivered after ackWait
        procs[0].wait(10)
        for i in range(150, 300):
            await cluster.job(f"j{i}", f"p{i}", created=i)
        final = await decisions(
            nc, subjects, lambda ds: len({d["job"]["name"] for d in ds}) >= 300, within=60
        )
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(20)
    names = [d["job"]["name"] for d in final]
    assert sorted(set(names)) == sorted(f"j{i}" for i in range(300))
    assert len(names) == 300, "a decision was published twice"
    assert all(d["decision"] == "admitted" for d in final)
    ended = {r.name: r.process.returncode for r in replicas}
    assert set(ended.values()) <= {0, -signal.SIGKILL}, (ended, [r.tail() for r in replicas])
    await nc.close()


# Sized for CI: every limit still binds many times over (`python -m bench.arbitrator_bench` runs 100,000).
JOBS = 150


async def test_four_replicas_racing_never_exceed_any_limit(
    nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    # 150 jobs over 50 nodes and 10 workloads; node, namespace, workload and global limits all bind.
    # A checker reads the ledger after every admission it sees; jobs are released as they are admitted.
    limits = {"node": 2, "namespace": 40, "workload": 3, "global": 25}
    configs = replicas_config(
        nats_srv,
        redis_srv,
        test_id,
        4,
        maxMigratingGlobally=25,
        maxMigratingPerNode=2,
        maxMigratingPerNamespace=40,
        maxMigratingPerWorkload=3,
        maxUnavailablePerWorkload=3,
    )
    nc, subjects, cluster = await setup_cluster(configs[0])
    for w in range(10):
        await cluster.deployment(f"w{w}", JOBS // 10)
    for i in range(JOBS):
        await cluster.pod(f"p{i}", f"node-{i % 50}", f"w{i % 10}")
    client = aioredis.from_url(configs[0].redis.url)
    violations: list[str] = []
    released = 0

    async def check() -> None:
        async for key in client.scan_iter(match=f"{{{test_id}}}:ledger:slots:*", count=1000):
            name = key.decode().split(":slots:", 1)[1]
            kind = name.split(":", 1)[0]
            size = await client.scard(key)
            if size > limits[kind]:
                violations.append(f"{name}: {size} > {limits[kind]}")

    async with arbitrators(configs):
        for i in range(JOBS):
            await cluster.job(f"j{i}", f"p{i}", created=i)
        js = nc.jetstream()
        sub = await js.subscribe(f"{subjects.prefix}.jobs.admitted.>", ordered_consumer=True)
        done: set[str] = set()
        while len(done) < JOBS:
            msg = await sub.next_msg(timeout=10)  # fails when no job was admitted for 10 s
            decision = json.loads(msg.data)
            await check()
            done.add(decision["job"]["name"])
            assert await release(configs[0], nc, subjects, decision["job"]["uid"])
            released += 1
        await sub.unsubscribe()
    await client.aclose()
    assert not violations, violations[:5]
    assert released == JOBS
    await nc.close()


async def test_more_blocked_jobs_than_a_round_reads_do_not_starve_one_that_fits(
    nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    """A round reads 8 jobs here: 60 jobs blocked on a full node ahead of one that fits must not stop it
    (the defect of a scan-depth-bounded pass), and a budget that grows wakes the job it blocked."""
    # maxMigratingPerWorkload 100 opens the limit for web (200 replicas); for db (3) it is capped at 3, all
    # of them, which the expected-replicas rule refuses: skipCheckExpectedReplicas keeps db to its budget.
    base = arbitrator_config(
        nats_srv,
        redis_srv,
        test_id,
        maxMigratingPerNode=1,
        maxMigratingPerWorkload=100,
        skipCheckExpectedReplicas=True,
    )
    config = msgspec.structs.replace(base, arbitrator=msgspec.structs.replace(base.arbitrator, scan_depth=8))
    nc, subjects, cluster = await setup_cluster(config)
    await cluster.deployment("web", 200)
    await cluster.deployment("db", 3)
    await cluster.pdb("db", "db", allowed=0)
    for i in range(61):
        await cluster.pod(f"web-{i}", "node-full", "web")
    await cluster.pod("lone", "node-free", "web")
    await cluster.pod("db-0", "node-db", "db")
    await cluster.other_replicas()
    async with arbitrators([config]):
        for i in range(61):
            await cluster.job(f"blocked-{i:02d}", f"web-{i}", priority=100, created=i)
        await decisions(nc, subjects, lambda ds: admitted(ds) == ["blocked-00"])
        await cluster.job("lone", "lone", priority=0, created=100)  # ranks behind all 60 blocked
        await cluster.job("db", "db-0", priority=0, created=101)
        ds = await decisions(nc, subjects, lambda ds: "lone" in admitted(ds))
        assert admitted(ds) == ["blocked-00", "lone"]
        audit = await _audit_until(
            nc,
            subjects,
            lambda rs: any(r["job"] == "db" and r.get("rule") == "PodDisruptionBudget" for r in rs),
        )
        assert any("PodDisruptionBudget default/db" in r["message"] for r in audit if r["job"] == "db")
        # The budget allows one disruption now: its watcher event wakes the job it blocked.
        await cluster.pdb("db", "db", allowed=1)
        ds = await decisions(nc, subjects, lambda ds: "db" in admitted(ds), within=5)
        assert admitted(ds) == ["blocked-00", "lone", "db"]
    await nc.close()


# Koordinator's TestDoOnceArbitrate: of each case's jobs, those failing a non-retryable filter fail, those
# failing only a retryable one wait, the rest pass. Here a non-retryable filter is the eviction cost that
# forbids moving a pod, a retryable one a budget that allows no disruption now.
DO_ONCE_ARBITRATE = {  # case: (jobs, non-retryable, retryable)
    "test-1": (10, {2}, {3, 7}),
    "test-2": (10, {3}, {3, 7}),
    "test-3": (5, {0, 1, 2, 3, 4}, set()),
    "test-4": (5, set(), {0, 1, 2, 3, 4}),
    "test-5": (5, set(), {2}),
}


async def test_do_once_arbitrate_fails_the_non_retryable_holds_the_retryable_and_passes_the_rest(
    nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    unlimited = ["MaxMigratingPerWorkload", "MaxUnavailablePerWorkload", "ExpectedReplicas"]
    config = arbitrator_config(
        nats_srv, redis_srv, test_id, maxMigratingPerNode=0, skipEvictionGates=unlimited
    )
    nc, subjects, cluster = await setup_cluster(config)
    never_cost = {"scheduling.koordinator.sh/eviction-cost": "2147483647"}
    for case, (count, never, later) in DO_ONCE_ARBITRATE.items():
        free, held = case.replace("-", ""), case.replace("-", "") + "held"
        await cluster.deployment(free, 100)
        await cluster.deployment(held, 100)
        await cluster.pdb(f"{held}-budget", held, 0)
        for i in range(count):
            annotations = never_cost if i in never else {}
            await cluster.pod(f"{case}-{i}", "node-1", held if i in later else free, annotations=annotations)
    waiting = {f"{case}-j{i}" for case, (_, never, later) in DO_ONCE_ARBITRATE.items() for i in later - never}
    decided = sum(count for count, _, _ in DO_ONCE_ARBITRATE.values()) - len(waiting)
    async with arbitrators([config]):
        for case, (count, _, _) in DO_ONCE_ARBITRATE.items():
            for i in range(count):
                await cluster.job(f"{case}-j{i}", f"{case}-{i}", created=i)
        ds = await decisions(nc, subjects, lambda ds: len(ds) >= decided)
        audit = await _audit_until(
            nc,
            subjects,
            lambda rs: waiting <= {r.get("job") for r in rs if r.get("rule") == "PodDisruptionBudget"},
        )
    outcome = {d["job"]["name"]: d["decision"] for d in ds}
    deferred = {r["job"] for r in audit if r.get("rule") == "PodDisruptionBudget"}
    for case, (count, never, later) in DO_ONCE_ARBITRATE.items():
        jobs = {i: f"{case}-j{i}" for i in range(count)}
        assert {i for i, j in jobs.items() if outcome.get(j) == "rejected"} == never, case
        assert {i for i, j in jobs.items() if j in deferred and j not in outcome} == later - never, case
        assert {i for i, j in jobs.items() if outcome.get(j) == "admitted"} == set(jobs) - never - later, case
    await nc.close()
