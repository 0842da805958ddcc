"""The pipeline as a whole: intents in, two replicas of each service under a storm of jobs, crashes, and the
audit stream as a job's history."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from typing import Any, cast

import msgspec
import nats
import pytest
import redis.asyncio as aioredis

from kubesim.sim import SimHandle
from podherd.client import signed
from podherd.harness.servers import Server
from services.executor.service import Executor
from services.tracker.jobs.reconciler import Reconciler
from services.tracker.jobs.state import JobState
from services.tracker.keys import TrackerKeys
from services.tracker.service import Tracker
from shared.api import codec, paths
from shared.api.messages import Command, IntentReply, MigrationIntent, PodKey
from shared.config.model import CollectorConfig
from shared.ledger.scripts import as_text
from shared.ledger.store import Ledger
from shared.nats import bus
from tests.e2e.pipeline import (
    GROUP,
    PLURAL,
    VERSION,
    create_job,
    ended,
    pipeline,
    pipeline_config,
    until_job,
)
from tests.e2e.test_lifecycle import (
    cluster,
    start,
    until_no_reservations,
    web_pods,
)
from tests.kube import Kube, watch_until
from tests.polling import until

pytestmark = [pytest.mark.e2e, pytest.mark.integration]


def all_jobs(kube: Kube) -> dict[str, dict[str, Any]]:
    items = kube.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)["items"]
    return {i["metadata"]["name"]: i for i in items}


async def until_all_ended(kube: Kube, count: int, stalled: float = 30.0) -> dict[str, dict[str, Any]]:
    """Until `count` jobs have ended; fails only when no job changed for `stalled` seconds."""

    def done(state: dict[str, Any]) -> bool:
        return len(state) >= count and all(ended(j) for j in state.values())

    state = await asyncio.to_thread(
        watch_until,
        kube.custom.list_cluster_custom_object,
        done,
        stalled,
        idle=True,
        group=GROUP,
        version=VERSION,
        plural=PLURAL,
    )
    return {k.lstrip("/"): v for k, v in state.items()}


async def test_an_intent_becomes_a_job_that_moves_the_pod(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    kube = start(kubesim_factory, cluster())
    name = sorted(web_pods(kube))[0]
    # nodeFit on: the tracker finds the pod room elsewhere first, with no more than its RBAC allows.
    config = pipeline_config(kube.handle, nats_srv, redis_srv, test_id, nodeFit=True)
    nc = await nats.connect(nats_srv.url)
    subjects = bus.Subjects(test_id)
    intent = MigrationIntent(
        idempotency_key="defrag-7", pod=PodKey(namespace="default", name=name), requester="tests"
    )
    async with pipeline(config):
        replies = []
        for _ in range(3):  # the same intent thrice: one job
            replies.append(await until_answered(nc, subjects, intent, signed(config)))
        assert len({r.job for r in replies}) == 1 and [r.created for r in replies] == [True, False, False]
        job_name = replies[0].job
        assert job_name is not None
        job = await until_job(kube, job_name, ended)
        # Every step of its history on the audit stream names who asked, as the cluster proved it.
        history = await nc.jetstream().subscribe(subjects.audit(job_name), ordered_consumer=True)
        steps: list[tuple[str, str | None]] = []
        while not steps or steps[-1][0] != "Succeeded":
            entry = json.loads((await history.next_msg(timeout=10)).data)
            if entry["action"] == "transition":
                steps.append((entry["phase"], entry.get("requester")))
    await nc.close()
    assert job["status"]["phase"] == "Succeeded"
    assert list(all_jobs(kube)) == [job_name]
    assert {who for _, who in steps} == {"system:serviceaccount:podherd:tests"}, steps


async def test_finished_jobs_are_collected_and_an_intent_sent_again_moves_nothing(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    kube = start(kubesim_factory, cluster())
    first, other = sorted(web_pods(kube))[:2]
    config = msgspec.structs.replace(
        pipeline_config(kube.handle, nats_srv, redis_srv, test_id),
        collector=CollectorConfig(retention="1s", interval="300ms"),
    )
    nc = await nats.connect(nats_srv.url)
    subjects = bus.Subjects(test_id)
    intent = MigrationIntent(
        idempotency_key="defrag-9", pod=PodKey(namespace="default", name=first), requester="tests"
    )

    async def ask(what: MigrationIntent) -> IntentReply:
        msg = await nc.request(
            subjects.intent_request, codec.encode(what), timeout=10, headers=signed(config)
        )
        return codec.decode(msg.data, IntentReply)

    async with pipeline(config):
        create_job(kube, "in-flight", other, paused=True)  # held Pending: never collected, however old
        reply = await until_answered(nc, subjects, intent, signed(config))
        assert reply.ok and reply.created and reply.job
        job = await until_job(kube, reply.job, ended)
        assert job["status"]["phase"] == "Succeeded"
        await asyncio.to_thread(
            watch_until,
            kube.custom.list_cluster_custom_object,
            gone(f"/{reply.job}"),
            30,
            group=GROUP,
            version=VERSION,
            plural=PLURAL,
        )
        again = await ask(intent)  # re-sent after its job was collected
        elsewhere = await ask(msgspec.structs.replace(intent, pod=PodKey(namespace="default", name=other)))
        # The tracker lets go of everything it kept for the job once its PMJ is gone (the deletion reaches
        # it through the watcher: no event of its own to await).
        client = aioredis.from_url(redis_srv.url)
        try:
            name, uid = reply.job, job["metadata"]["uid"]  # (the job's name, asserted above)

            async def let_go() -> bool:
                return not await tracker_state_of(client, test_id, name, uid)

            await until(let_go, within=15, what="the tracker letting go of the job's state", every=0.2)
            # Its replacement's claim lasts while that pod runs, and goes with it.
            moved_to = job["status"]["podRef"]
            claims = f"{test_id}:tracker:claims"
            assert await client.hget(claims, moved_to["uid"]) == job["metadata"]["uid"].encode()
            kube.core.delete_namespaced_pod(moved_to["name"], "default")

            async def claim_gone() -> bool:
                return not await client.hget(claims, moved_to["uid"])

            await until(
                claim_gone, within=15, what="the tracker letting go of the replacement's claim", every=0.2
            )
        finally:
            await client.aclose()
    audit = await nc.jetstream().subscribe(subjects.audit(reply.job), ordered_consumer=True)
    actions = []
    while "collected" not in actions:
        actions.append(json.loads((await audit.next_msg(timeout=10)).data)["action"])
    await nc.close()
    assert (again.ok, again.created, again.job) == (True, False, reply.job)  # the same job, nothing new
    assert elsewhere.error is not None and elsewhere.error.code == "Conflict"
    assert set(all_jobs(kube)) == {"in-flight"}  # collected; the one in flight stays
    evicted = kube.handle.call(lambda sim: sum(sim.store.evictions.values()))
    assert evicted == 1  # the pod was moved once
    until_no_reservations(kube)


async def tracker_state_of(client: aioredis.Redis, prefix: str, name: str, uid: str) -> list[str]:
    """Every tracker key, hash field, set or sorted-set member that names the job. A claim on its replacement
    lasts while that pod runs (no other job may take it), so claims are not looked at."""
    found = []
    async for raw in client.scan_iter(match=f"{prefix}:tracker:*", count=1000):
        key = as_text(raw)
        if key.endswith(":claims"):
            continue
        if name in key or uid in key:
            found.append(key)
            continue
        kind = as_text(await client.type(key))
        members: list[bytes | str] = []
        if kind == "hash":
            pairs = await client.hgetall(key)
            members = [*pairs.keys(), *pairs.values()]
        elif kind == "set":
            members = list(await client.smembers(key))
        elif kind == "zset":
            members = cast(list[bytes | str], await client.zrange(key, 0, -1))  # members only, no scores
        texts = [as_text(m) for m in members]
        found += [f"{key}: {text[:80]}" for text in texts if name in text or uid in text]
    return found


def gone(key: str) -> Callable[[dict[str, Any]], bool]:
    """A watch predicate: `key` was there and has been deleted."""
    seen: list[bool] = []

    def holds(state: dict[str, Any]) -> bool:
        if key in state:
            seen.append(True)
        return bool(seen) and key not in state

    return holds


async def until_answered(
    nc: Any, subjects: bus.Subjects, intent: MigrationIntent, headers: dict[str, str]
) -> IntentReply:
    """The intent's answer from the pipeline's tracker (which `pipeline` waits for to answer)."""
    return codec.decode(await when_served(nc, subjects, codec.encode(intent), headers), IntentReply)


async def when_served(nc: Any, subjects: bus.Subjects, data: bytes, headers: dict[str, str]) -> bytes:
    """The answer to a request on the intent subject. `pipeline` waits for its trackers to answer; a
    request that still finds none (seen, rarely, just after) is sent again."""
    # No event tells when the server routes to the subscription: asked again while no one answers.
    msg = await until(
        lambda: nc.request(subjects.intent_request, data, timeout=10, headers=headers),
        within=30,
        what="a tracker answering on the intent subject",
        every=0.1,
        retry=(nats.errors.NoRespondersError,),
    )
    answer: bytes = msg.data
    return answer


async def test_two_replicas_of_each_service_carry_a_storm_of_jobs(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    # 40 jobs for the 40 replicas of one workload, up to 16 at once: replacements of one workload may
    # take each other's Reservations (they are owned by the controller); each job still ends with exactly one.
    # (`python -m bench.e2e_bench` runs the same through the services as processes at larger sizes.)
    kube = start(kubesim_factory, cluster(nodes=16, web=40, node_cpu=16, cpu="100m"))
    pods = sorted(web_pods(kube))
    config = pipeline_config(
        kube.handle, nats_srv, redis_srv, test_id, maxMigratingPerWorkload=16, maxUnavailablePerWorkload=16
    )
    async with pipeline(config, replicas=2):
        for i, pod in enumerate(pods):
            create_job(kube, f"storm-{i:03d}", pod)
        final = await until_all_ended(kube, len(pods))
    phases = [j["status"]["phase"] for j in final.values()]
    assert phases.count("Succeeded") == len(pods), {p: phases.count(p) for p in set(phases)}
    # Every replacement is a distinct, running pod in reserved room; nothing is left behind.
    replacements = {j["status"]["podRef"]["name"] for j in final.values()}
    live = web_pods(kube)
    assert len(replacements) == len(pods) and replacements == set(live) and not (set(pods) & set(live))
    assert all(
        "scheduling.koordinator.sh/reservation-allocated" in (p.metadata.annotations or {})
        for p in live.values()
    )
    until_no_reservations(kube)
    client = aioredis.from_url(redis_srv.url)
    held = await Ledger(client, test_id, 600).snapshot()
    await client.aclose()
    assert held == {"slots": {}, "claims": {}}  # every job's slots released


async def test_the_audit_stream_replays_the_phases_the_job_went_through(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    kube = start(kubesim_factory, cluster())
    name = sorted(web_pods(kube))[0]
    config = pipeline_config(kube.handle, nats_srv, redis_srv, test_id)
    seen: list[str] = []

    def record(state: dict[str, Any]) -> bool:
        job = state["/told"]
        phase = (job.get("status") or {}).get("phase") or "Pending"
        if not seen or seen[-1] != phase:
            seen.append(phase)
        return ended(job)

    async with pipeline(config):
        create_job(kube, "told", name)
        await asyncio.to_thread(
            watch_until,
            kube.custom.list_cluster_custom_object,
            record,
            30,
            group=GROUP,
            version=VERSION,
            plural=PLURAL,
        )
    nc = await nats.connect(nats_srv.url)
    sub = await nc.jetstream().subscribe(f"{test_id}.audit.told", ordered_consumer=True)
    replayed: list[str] = ["Pending"]
    while True:
        msg = await sub.next_msg(timeout=5)
        entry = json.loads(msg.data)
        if entry["action"] == "transition" and entry["phase"] != replayed[-1]:
            replayed.append(entry["phase"])
        if msg.metadata.num_pending == 0:
            break
    await nc.close()
    assert replayed == ["Pending", "Running", "Succeeded"]
    assert [p for p in seen if p != "Pending" or seen.index(p) == 0] == replayed


async def test_a_job_admitted_before_its_first_status_still_starts_its_history_pending(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    # The arbitrator can admit a job before any tracker has written its first status (a busy tracker): the
    # first status written is Running, and the audit stream must still tell Pending -> Running -> Succeeded.
    kube = start(kubesim_factory, cluster())
    name = sorted(web_pods(kube))[0]
    config = pipeline_config(kube.handle, nats_srv, redis_srv, test_id)
    nc = await nats.connect(nats_srv.url)
    js = nc.jetstream()
    async with pipeline(config) as p:
        await p.kill(next(r for r in p.running if r.name.startswith("tracker")))
        admitted = await js.subscribe(f"{test_id}.jobs.admitted.>", ordered_consumer=True)
        create_job(kube, "early", name)
        await admitted.next_msg(timeout=30)
        assert "status" not in kube.custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, "early")
        await p.start("tracker", "r1")
        job = await until_job(kube, "early", ended)
    assert job["status"]["phase"] == "Succeeded"
    audit = await js.subscribe(f"{test_id}.audit.early", ordered_consumer=True)
    phases: list[str] = []
    while not phases or phases[-1] != "Succeeded":
        entry = json.loads((await audit.next_msg(timeout=10)).data)
        if entry["action"] == "transition" and (not phases or entry["phase"] != phases[-1]):
            phases.append(entry["phase"])
    await nc.close()
    assert phases == ["Pending", "Running", "Succeeded"]


async def test_work_a_killed_replica_held_moves_again_within_seconds_of_its_successor(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    # An executor takes the job's evict command and hangs (then dies, as SIGKILL would), holding the message
    # unacknowledged. With the default ack wait the successor evicts within 5 s of starting, not after 30.
    kube = start(kubesim_factory, cluster())
    name = sorted(web_pods(kube))[0]
    config = pipeline_config(kube.handle, nats_srv, redis_srv, test_id)
    holding = asyncio.Event()

    class HangsMidEviction(Executor):
        async def _evict(self, job: Any, command: Command, msg: Any) -> None:
            holding.set()
            await asyncio.Event().wait()

    def evicted(state: dict[str, Any]) -> bool:
        pod = state.get(f"default/{name}")
        return pod is None or pod.metadata.deletion_timestamp is not None

    async with pipeline(config) as p:
        await p.kill(next(r for r in p.running if r.name.startswith("executor")))
        doomed = await p.start("executor", "hangs", HangsMidEviction)
        create_job(kube, "held", name)
        async with asyncio.timeout(30):
            await holding.wait()
        await p.kill(doomed)
        started = time.monotonic()
        await p.start("executor", "r1")
        await asyncio.to_thread(watch_until, kube.core.list_namespaced_pod, evicted, 30, namespace="default")
        took = time.monotonic() - started
        job = await until_job(kube, "held", ended)
    assert job["status"]["phase"] == "Succeeded", job["status"]
    assert took <= 5.0, f"the held eviction came {took:.1f} s after the successor started"


class Crash(BaseException):
    """The process dies here (as SIGKILL would: nothing after it runs, nothing is acknowledged)."""


class DiesAfterEvicting(Executor):
    """Evicts, then dies before acknowledging the command (as a SIGKILL right after the API call)."""

    async def _evict(self, job: Any, command: Command, msg: Any) -> None:
        await super()._evict(job, command, msg)
        raise Crash


class DiesAfterWritingStatusChange(Reconciler):
    async def transitioned(self, job: Any, previous: Any, step: Any) -> None:
        raise Crash


class DiesAfterWritingStatus(Tracker):
    """Writes the first status change, then dies before its commands and audit record."""

    reconciler_type = DiesAfterWritingStatusChange


class NotingReconciler(Reconciler):
    known: list[bool] = []

    async def transitioned(self, job: Any, previous: Any, step: Any) -> None:
        name = job.metadata.name or ""
        written = await self.parts.observer.get(paths.job(name)) or {}
        version = written.get("metadata", {}).get("resourceVersion", "")
        NotingReconciler.known.append(await self.parts.state.is_own_settled_write(name, version))
        await super().transitioned(job, previous, step)


class NotesSettledWrites(Tracker):
    """Notes, after each status it writes and before it goes on to act, whether that write is already known
    as one that leaves the job settled (the event of a write often comes back before the reconcile ends)."""

    reconciler_type = NotingReconciler


async def test_an_own_write_is_known_settled_before_the_reconcile_acts_on_it(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    kube = start(kubesim_factory, cluster())
    name = sorted(web_pods(kube))[0]
    config = pipeline_config(kube.handle, nats_srv, redis_srv, test_id)
    NotingReconciler.known.clear()
    async with pipeline(config) as p:
        await p.kill(next(r for r in p.running if r.name.startswith("tracker")))
        await p.start("tracker", "noting", NotesSettledWrites)
        created = create_job(kube, "noted", name)
        job = await until_job(kube, "noted", ended)
        version = job["metadata"]["resourceVersion"].encode()
        client = aioredis.from_url(redis_srv.url)
        # Its ending carried out at the version it ended at (once a reconcile finds nothing concerned it
        # meanwhile; Redis tells no one of the write): events that name it from now on reconcile nothing.
        mark = None

        async def ended_at_version() -> bool:
            nonlocal mark
            mark = await client.hget(TrackerKeys(test_id).ended, "noted")
            return bool(mark == version)

        with contextlib.suppress(TimeoutError):
            await until(ended_at_version, within=10, what="the job's end marked at its version")
    # The job as created was read and carried out: its ADDED event, however late, decides nothing.
    state = JobState(client, TrackerKeys(test_id), "5m")
    created_known = await state.is_own_settled_write("noted", created["metadata"]["resourceVersion"])
    await client.aclose()
    assert job["status"]["phase"] == "Succeeded", job["status"]
    # Pending, Running (reserving, evicting, waiting for the replacement), Succeeded: each status written
    # that leaves the job where it rests is known as the tracker's own before its commands go out, so its
    # event starts no second reconcile deciding the same again.
    assert len(NotingReconciler.known) >= 3 and sum(NotingReconciler.known) >= 2, NotingReconciler.known
    assert created_known
    assert mark == version


@pytest.mark.parametrize("crash", ["executor after evicting", "tracker after writing status"])
async def test_a_crash_between_acting_and_acknowledging_evicts_once_and_ends_the_job(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str, crash: str
) -> None:
    kube = start(kubesim_factory, cluster())
    name = sorted(web_pods(kube))[0]
    config = pipeline_config(kube.handle, nats_srv, redis_srv, test_id)
    service, faulty = (
        ("executor", DiesAfterEvicting)
        if crash.startswith("executor")
        else ("tracker", DiesAfterWritingStatus)
    )
    async with pipeline(config) as p:
        await p.kill(next(r for r in p.running if r.name.startswith(service)))
        doomed = await p.start(service, "faulty", faulty)
        create_job(kube, "crashy", name)
        finished, _ = await asyncio.wait([doomed.task], timeout=30)  # it dies mid-job
        assert finished and isinstance(doomed.task.exception(), BaseExceptionGroup | Crash)
        await p.kill(doomed)
        await p.start(service, "r1")  # the message it held is redelivered to the new replica
        job = await until_job(kube, "crashy", ended, within=40)
    assert job["status"]["phase"] == "Succeeded", job["status"]
    live = web_pods(kube)
    assert name not in live and len(live) == 3  # evicted once: one replacement
    until_no_reservations(kube)
    client = aioredis.from_url(redis_srv.url)
    held = await Ledger(client, test_id, 600).snapshot()
    await client.aclose()
    assert held == {"slots": {}, "claims": {}}  # released
