"""The Redis ledger against real Redis: the Lua scripts agree with the reference rules, hold every limit
under concurrent admissions, release exactly once, and fail closed until rebuilt."""

from __future__ import annotations

import asyncio
import random
import uuid
from typing import cast

import pytest
import redis.asyncio as aioredis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from podherd.harness.servers import Server
from services.arbitrator.rules import limits
from shared.ledger.rebuild import HeldJob
from shared.ledger.scripts import as_text
from shared.ledger.slots import Bucket, Slot
from shared.ledger.store import Candidate, Ledger
from tests.conftest import RedisScope

pytestmark = pytest.mark.integration


def to_specs(p: limits.AdmissionPlan) -> tuple[list[Slot], list[Bucket]]:
    return (
        [Slot(s.rule, s.key, s.limit, s.what, s.replicas) for s in p.slots],
        [Bucket(b.rule, b.key, b.rate, b.burst, b.what) for b in p.buckets],
    )


async def ready_ledger(scope: RedisScope, ttl: float = 600.0) -> Ledger:
    ledger = Ledger(scope.client, scope.prefix, ttl)
    await ledger.completeness.rebuild([])
    return ledger


# One operation: admit job j (pod p) with a plan drawn from a small space of keys and limits, release it,
# or a pod of workload w becomes Ready or not. A slot on workload:w may be maxUnavailablePerWorkload's
# (with the workload's replica count).
slot_st = st.tuples(
    st.sampled_from(["node:a", "node:b", "workload:w", "global"]),
    st.integers(0, 3),
    st.one_of(st.none(), st.integers(0, 6)),
).map(lambda s: s if s[0] == "workload:w" else (s[0], s[1], None))
plan_st = st.tuples(
    st.integers(0, 9),  # job
    st.integers(0, 6),  # pod
    st.lists(slot_st, max_size=4, unique_by=lambda s: (s[0], s[2] is None)),
    st.booleans(),  # with a bucket
)
op_st = st.one_of(
    st.tuples(st.just("admit"), plan_st),
    st.tuples(st.just("release"), st.integers(0, 9)),
    st.tuples(st.just("ready"), st.tuples(st.integers(0, 6), st.booleans())),
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(op_st, min_size=1, max_size=25))
async def test_lua_matches_the_reference(redis_scope: RedisScope, ops: list[tuple[str, object]]) -> None:
    prefix = f"{redis_scope.prefix}h{uuid.uuid4().hex[:12]}"
    ledger = Ledger(redis_scope.client, prefix, 600.0)
    await ledger.completeness.rebuild([])
    reference = limits.LedgerView(slots={}, evicting={}, tokens={}, claims={}, ready={"workload:w": set()})
    held: dict[str, limits.AdmissionPlan] = {}
    now = 1000.0
    for version, (kind, arg) in enumerate(ops, start=1):
        now += 0.25
        # The ledger's count of jobs in flight whose pod is not Ready follows the reference after every step.
        pods = {job: pod for pod, job in reference.claims.items()}
        gone = {
            j
            for j in reference.slots.get("workload:w", set())
            if pods.get(j) not in reference.ready["workload:w"]
        }
        assert {
            as_text(m) for m in await redis_scope.client.smembers(f"{ledger.prefix}:gone:workload:w")
        } == gone
        if kind == "ready":
            pod, ready = cast(tuple[int, bool], arg)
            assert await ledger.pod_ready(
                f"ns/pod-{pod}",
                str(version),
                f"pod-{pod}",
                ready=ready,
                workload_key="workload:w",
                deleted=False,
            )
            members = reference.ready["workload:w"]
            (members.add if ready else members.discard)(f"pod-{pod}")
            continue
        if kind == "release":
            job = f"job-{arg}"
            released = await ledger.release(job)
            assert released == (job in held)
            if job in held:
                plan = held.pop(job)
                for slot in plan.slots:
                    reference.slots[slot.key].discard(job)
                reference.claims.pop(plan.pod_uid, None)  # type: ignore[attr-defined]
            continue
        j, pod, slot_defs, with_bucket = cast(tuple[int, int, list[tuple[str, int, int | None]], bool], arg)
        plan = limits.AdmissionPlan(
            job_uid=f"job-{j}",
            pod_uid=f"pod-{pod}",
            slots=tuple(
                limits.Slot("rule-" + key, key, limit, key, replicas) for key, limit, replicas in slot_defs
            ),
            buckets=(limits.Bucket("evictQPS", "global", 2.0, 2, "the cluster"),) if with_bucket else (),
        )
        expected = limits.evaluate(plan, reference, now)
        slots, buckets = to_specs(plan)
        verdict = await ledger.admit(plan.job_uid, plan.pod_uid, slots, buckets=buckets, now=now)
        assert (verdict.admitted, verdict.rule, verdict.message) == (
            expected.admitted,
            expected.rule,
            expected.message,
        )
        outcome = (
            "forbidden"
            if expected.forbidden
            else "admitted"
            if expected.admitted
            else ("done" if expected.rule == "done" else "deferred")
        )
        assert verdict.outcome == outcome
        if expected.admitted and plan.job_uid not in held:
            held[plan.job_uid] = plan
            for slot in plan.slots:
                reference.slots.setdefault(slot.key, set()).add(plan.job_uid)  # type: ignore[attr-defined]
            for bucket in plan.buckets:
                tokens, last = reference.tokens.get(bucket.key, (float(bucket.burst), now))
                reference.tokens[bucket.key] = (  # type: ignore[index]
                    min(float(bucket.burst), tokens + (now - last) * bucket.rate) - 1,
                    now,
                )
            reference.claims[plan.pod_uid] = plan.job_uid  # type: ignore[index]
            reference.done.add(plan.job_uid)
    snapshot = await ledger.snapshot()
    assert snapshot["slots"] == {k: sorted(v) for k, v in reference.slots.items() if v}
    assert snapshot["claims"] == dict(reference.claims)


async def test_concurrent_admissions_never_exceed_a_limit(redis_srv: Server, redis_scope: RedisScope) -> None:
    ledger = await ready_ledger(redis_scope)
    limits_by_key = {"node:a": 2, "node:b": 3, "workload:w": 4, "global": 6}
    clients = [aioredis.from_url(redis_srv.url) for _ in range(4)]  # four arbitrator replicas
    replicas = [Ledger(c, redis_scope.prefix, 600.0) for c in clients]
    admitted: list[str] = []
    violations: list[str] = []

    async def replica(index: int) -> None:
        rng = random.Random(index)
        for n in range(250):
            job = f"job-{index}-{n}"
            node = rng.choice(["node:a", "node:b"])
            slots = [
                Slot("maxMigratingPerNode", node, limits_by_key[node], node),
                Slot("maxMigratingPerWorkload", "workload:w", 4, "w"),
                Slot("maxMigratingGlobally", "global", 6, "cluster"),
            ]
            verdict = await replicas[index].admit(job, f"pod-{index}-{n}", slots, buckets=[])
            if verdict.admitted:
                admitted.append(job)
                snapshot = await ledger.snapshot()
                for key, members in snapshot["slots"].items():
                    if len(members) > limits_by_key[key]:
                        violations.append(f"{key}: {len(members)}")
            if rng.random() < 0.5 and admitted:
                await replicas[index].release(admitted.pop(rng.randrange(len(admitted))))

    await asyncio.gather(*(replica(i) for i in range(4)))
    for client in clients:
        await client.aclose()
    assert not violations
    assert len(admitted) <= 6


async def test_release_exactly_once_and_retries_take_nothing_twice(redis_scope: RedisScope) -> None:
    ledger = await ready_ledger(redis_scope)
    slots = [Slot("maxMigratingPerNode", "node:a", 2, "node a")]
    assert (await ledger.admit("j1", "p1", slots, buckets=[])).admitted
    again = await ledger.admit("j1", "p1", slots, buckets=[])
    assert again.admitted and again.message == "already admitted"
    assert (await ledger.snapshot())["slots"] == {"node:a": ["j1"]}
    forbidden = await ledger.admit("j2", "p1", slots, buckets=[])
    assert (forbidden.outcome, forbidden.rule) == ("forbidden", "ActiveJob")
    assert [await ledger.release("j1") for _ in range(3)] == [True, False, False]
    assert await ledger.snapshot() == {"slots": {}, "claims": {}}
    # Released is finished: a replayed admission of the same job takes nothing again...
    replay = await ledger.admit("j1", "p1", slots, buckets=[])
    assert (replay.outcome, replay.rule) == ("done", "done")
    assert await ledger.snapshot() == {"slots": {}, "claims": {}}
    # ...until its PMJ is gone and forgotten.
    await ledger.forget("j1")
    assert (await ledger.admit("j1", "p1", slots, buckets=[])).admitted


async def test_fail_closed_until_rebuilt_and_rebuild_restores_the_ledger(redis_scope: RedisScope) -> None:
    ledger = Ledger(redis_scope.client, redis_scope.prefix, 600.0)
    closed = await ledger.admit("j1", "p1", [], buckets=[])
    assert closed.outcome == "closed"
    await ledger.completeness.rebuild([])
    for i, node in enumerate(["a", "a", "b"]):
        keys = [Slot("maxMigratingPerNode", f"node:{node}", 2, node), Slot("g", "global", 10, "c")]
        assert (await ledger.admit(f"j{i}", f"p{i}", keys, buckets=[])).admitted
    before = await ledger.snapshot()
    # Redis loses everything (restart or FLUSHALL): admissions stop...
    keys_to_drop = [k async for k in redis_scope.client.scan_iter(match=f"{{{redis_scope.prefix}}}*")]
    await redis_scope.client.delete(*keys_to_drop)
    assert not await ledger.completeness.is_complete()
    assert (await ledger.admit("j9", "p9", [], buckets=[])).outcome == "closed"
    # ...until the ledger is rebuilt from the running jobs, and then it is what it was.
    running = [HeldJob(f"j{i}", f"p{i}", (f"node:{n}", "global")) for i, n in enumerate(["a", "a", "b"])]
    assert await ledger.completeness.rebuild(running) == 3
    assert await ledger.snapshot() == before
    blocked = await ledger.admit("j3", "p3", [Slot("maxMigratingPerNode", "node:a", 2, "node a")], buckets=[])
    assert blocked.outcome == "deferred" and blocked.message == "deferred: maxMigratingPerNode 2/2 on node a"


async def test_evictions_in_progress_count_and_own_pods_are_not_counted_twice(
    redis_scope: RedisScope,
) -> None:
    ledger = await ready_ledger(redis_scope)
    node = [Slot("maxMigratingPerNode", "node:a", 2, "node a")]
    assert await ledger.set_evicting("pod-x", True, ["node:a"]) == 1
    assert (await ledger.admit("j1", "p1", node, buckets=[])).admitted
    deferred = await ledger.admit("j2", "p2", node, buckets=[])
    assert deferred.outcome == "deferred" and "2/2" in deferred.message
    assert await ledger.set_evicting("p1", True, ["node:a"]) == 0  # p1 is j1's: already counted
    assert await ledger.set_evicting("pod-x", False, ["node:a"]) == 1
    assert (await ledger.admit("j2", "p2", node, buckets=[])).admitted


async def test_a_pod_evacuated_in_the_background_for_its_own_job_does_not_keep_that_job_out(
    redis_scope: RedisScope,
) -> None:
    """An eviction the gate turned into a job marks the pod evicted in the background before its job is
    admitted: the job's own pod is not counted against it, and from its admission the job counts it."""
    ledger = await ready_ledger(redis_scope)
    node = [Slot("maxMigratingPerNode", "node:a", 1, "node a")]
    assert await ledger.set_evicting("p1", True, ["node:a"]) == 1
    blocked = await ledger.admit("j0", "p0", node, buckets=[])
    assert blocked.outcome == "deferred" and "1/1" in blocked.message  # another pod's job: counted
    assert (await ledger.admit("j1", "p1", node, buckets=[])).admitted
    assert (await ledger.admit("j0", "p0", node, buckets=[])).outcome == "deferred"  # j1 holds it once
    assert await ledger.release("j1")
    assert await ledger.set_evicting("p1", False, ["node:a"]) == 0  # no longer counted beside its job
    assert (await ledger.admit("j0", "p0", node, buckets=[])).admitted


async def test_buckets_use_redis_time_and_abandoned_slots_expire(redis_scope: RedisScope) -> None:
    ledger = Ledger(redis_scope.client, redis_scope.prefix, slot_ttl=0.3)
    await ledger.completeness.rebuild([])
    bucket = [Bucket("evictQPS", "global", 1.0, 1, "the cluster")]
    assert (await ledger.admit("j1", "p1", [Slot("n", "node:a", 1, "a")], buckets=bucket)).admitted
    second = await ledger.admit("j2", "p2", [], buckets=bucket)
    assert second.outcome == "deferred" and second.rule == "evictQPS"
    # j1 is never released (its PMJ vanished): after the slot TTL the next admission reclaims its slot.
    seconds, micros = await redis_scope.client.time()
    later = seconds + micros / 1e6 + 1.5
    third = await ledger.admit("j3", "p3", [Slot("n", "node:a", 1, "a")], buckets=bucket, now=later)
    assert third.admitted
    assert (await ledger.snapshot())["slots"] == {"node:a": ["j3"]}


NODE_A = (Slot("maxMigratingPerNode", "node:a", 1, "node a"),)


async def queue_jobs(ledger: Ledger, *jobs: tuple[str, str]) -> None:
    for job, key in jobs:
        await ledger.queue.enqueue(job, key)


async def run_head(
    ledger: Ledger, plans: dict[str, tuple[Slot, ...]], now: float | None = None
) -> dict[str, str]:
    """One round over the whole ready queue, as a replica does it: job -> outcome."""
    head = await ledger.queue.head(1000)
    candidates = [Candidate(job, f"pod-{job}", plans[job], ()) for job in head]
    verdicts = await ledger.admit_batch(candidates, from_queue=True, now=now)
    assert verdicts is not None
    return {job: v.outcome for job, v in zip(head, verdicts, strict=True)}


async def test_queue_admits_in_order_and_refuses_a_stale_head(redis_scope: RedisScope) -> None:
    ledger = await ready_ledger(redis_scope)
    await queue_jobs(ledger, ("late", "2"), ("first", "0"), ("second", "1"))
    assert await ledger.queue.head(10) == ["first", "second", "late"]
    candidates = [Candidate(job, f"pod-{job}", NODE_A, ()) for job in ("first", "second", "late")]
    verdicts = await ledger.admit_batch(candidates, from_queue=True)
    assert verdicts is not None
    assert [v.outcome for v in verdicts] == ["admitted", "deferred", "deferred"]  # one slot: the best gets it
    # Deferred jobs leave the ready queue: they wait on the gate that stopped them.
    assert await ledger.queue.head(10) == []
    assert await ledger.queue.parked() == {"second": "slot:node:a", "late": "slot:node:a"}
    assert await ledger.queue.length() == 2
    # Another replica's view of the head is now stale: it is refused, and nothing changes.
    assert await ledger.admit_batch(candidates[1:], from_queue=True) is None
    assert await ledger.queue.parked() == {"second": "slot:node:a", "late": "slot:node:a"}
    # A re-ranked job is looked at again; a dequeued one is gone from wherever it waited.
    await ledger.queue.enqueue("late", "0")
    assert await ledger.queue.head(10) == ["late"] and await ledger.queue.parked() == {
        "second": "slot:node:a"
    }
    assert await ledger.queue.dequeue("late") and not await ledger.queue.dequeue("late")
    assert await ledger.queue.dequeue("second") and await ledger.queue.parked() == {}
    assert await ledger.queue.length() == 0
    await ledger.queue.enqueue_many([("a", "1"), ("b", "2")])
    assert await ledger.queue.dequeue("a", "gone", "b") == 2  # several in one step: how many were pending
    assert await ledger.queue.length() == 0


async def test_a_deferral_names_what_holds_the_job(redis_scope: RedisScope) -> None:
    ledger = await ready_ledger(redis_scope)
    bucket = (Bucket("objectLimiters.workload", "workload-limiter:w", 1 / 600, 1, "workload w"),)
    assert (await ledger.admit("holder", "pod-h", NODE_A, buckets=[])).admitted
    assert (await ledger.admit("first", "pod-f", (), buckets=bucket)).admitted
    await queue_jobs(ledger, ("on-node", "1"), ("on-bucket", "2"), ("no-facts", "3"))
    candidates = [
        Candidate("on-node", "pod-n", NODE_A, ()),
        Candidate("on-bucket", "pod-b", (), bucket),
        Candidate("no-facts", "", (), (), wait=(1.0, "WaitingForFacts", "waiting for pod default/x")),
    ]
    verdicts = await ledger.admit_batch(candidates, from_queue=True)
    assert verdicts is not None
    assert [(v.outcome, v.gate) for v in verdicts] == [
        ("deferred", "slot:node:a"),
        ("deferred", "bucket:workload-limiter:w"),
        ("deferred", "timer"),
    ]
    # The countdown in a bucket's message changes from one look to the next; what holds the job does not.
    assert "next token in" in verdicts[1].message
    assert verdicts[1].holder == "objectLimiters.workload|bucket:workload-limiter:w"


async def test_the_sweep_wakes_a_slot_waiter_but_not_a_bucket_waiter_without_a_token(
    redis_scope: RedisScope,
) -> None:
    ledger = await ready_ledger(redis_scope)
    bucket = (Bucket("objectLimiters.workload", "workload-limiter:w", 1 / 600, 1, "workload w"),)
    assert (await ledger.admit("holder", "pod-h", NODE_A, buckets=[])).admitted
    assert (await ledger.admit("first", "pod-f", (), buckets=bucket)).admitted
    await queue_jobs(ledger, ("on-node", "1"), ("on-bucket", "2"))
    candidates = [Candidate("on-node", "pod-n", NODE_A, ()), Candidate("on-bucket", "pod-b", (), bucket)]
    assert await ledger.admit_batch(candidates, from_queue=True) is not None
    parked = await ledger.queue.parked()
    assert parked == {"on-node": "slot:node:a", "on-bucket": "bucket:workload-limiter:w"}
    cursor = 0
    for _ in range(5):  # sweeps at the arbitration interval, with nothing else happening
        cursor = await ledger.queue.sweep(cursor, 100)
        woken = await ledger.queue.head(10)
        # The slot's waiter is looked at again (its limit may have grown unannounced); the bucket's is not:
        # its token is ten minutes away, and the ledger's timer brings it back then.
        assert woken == ["on-node"]
        assert await run_head(ledger, {"on-node": NODE_A}) == {"on-node": "deferred"}
    assert (await ledger.queue.parked())["on-bucket"] == "bucket:workload-limiter:w"
    wait = await ledger.queue.tick()
    assert wait is not None and 0 < wait <= 600


async def test_a_release_wakes_the_best_waiter_and_room_is_passed_on(redis_scope: RedisScope) -> None:
    ledger = await ready_ledger(redis_scope)
    node_b = (Slot("maxMigratingPerNode", "node:b", 1, "node b"),)
    assert (await ledger.admit("holder-a", "pod-ha", NODE_A, buckets=[])).admitted
    assert (await ledger.admit("holder-b", "pod-hb", node_b, buckets=[])).admitted
    plans = {"j1": NODE_A + node_b, "j2": NODE_A, "j3": NODE_A}
    await queue_jobs(ledger, ("j3", "3"), ("j1", "1"), ("j2", "2"))
    assert await run_head(ledger, plans) == {"j1": "deferred", "j2": "deferred", "j3": "deferred"}
    assert set((await ledger.queue.parked()).values()) == {"slot:node:a"}
    # node a frees: only its best waiter comes back (one evaluation, not one per waiter).
    assert await ledger.release("holder-a")
    assert await ledger.queue.head(10) == ["j1"]
    # j1 still cannot go (node b is full): it waits on node b now and passes node a's room to j2.
    assert await run_head(ledger, plans) == {"j1": "deferred"}
    assert await ledger.queue.head(10) == ["j2"]
    assert await run_head(ledger, plans) == {"j2": "admitted"}
    # node a is full again: j3 keeps waiting, nothing else is woken.
    assert await ledger.queue.head(10) == []
    assert await ledger.queue.parked() == {"j1": "slot:node:b", "j3": "slot:node:a"}
    # Facts changed behind a gate (its limit may have grown): its best waiter is looked at again.
    assert await ledger.queue.wake(["slot:node:a"]) == 1
    assert await ledger.queue.head(10) == ["j3"]


async def test_tokens_and_awaited_facts_wake_by_timer(redis_scope: RedisScope) -> None:
    ledger = await ready_ledger(redis_scope)
    seconds, micros = await redis_scope.client.time()
    now = seconds + micros / 1e6
    bucket = (Bucket("evictQPS", "global", 2.0, 1, "the cluster"),)
    await queue_jobs(ledger, ("a", "1"), ("b", "2"))
    candidates = [Candidate(j, f"pod-{j}", (), bucket) for j in ("a", "b")]
    verdicts = await ledger.admit_batch(candidates, from_queue=True, now=now)
    assert verdicts is not None and [v.outcome for v in verdicts] == ["admitted", "deferred"]
    assert await ledger.queue.parked() == {"b": "bucket:global"}
    # The next token is due in 0.5 s: the tick says so, and wakes b once it is due.
    wait = await ledger.queue.tick(now=now)
    assert wait is not None and 0.45 <= wait <= 0.5
    assert await ledger.queue.tick(now=now + 0.2) is not None and await ledger.queue.head(10) == []
    assert await ledger.queue.tick(now=now + 0.6) is None
    assert await ledger.queue.head(10) == ["b"]
    # A job whose pod is not known yet waits on a timer, then is looked at again.
    await ledger.queue.enqueue("c", "3")
    waiting = Candidate("c", "", (), (), wait=(1.0, "WaitingForFacts", "waiting for pod default/c"))
    head = await ledger.queue.head(10)
    verdicts = await ledger.admit_batch(
        [*(Candidate(j, f"pod-{j}", (), bucket) for j in head[:-1]), waiting], from_queue=True, now=now + 0.6
    )
    assert verdicts is not None and verdicts[-1].outcome == "deferred"
    assert (await ledger.queue.parked())["c"] == "timer"
    await ledger.queue.tick(now=now + 1.7)
    assert "c" in await ledger.queue.head(10)


async def test_a_job_parked_until_its_window_opens_comes_back_at_once_when_the_windows_change(
    redis_scope: RedisScope,
) -> None:
    ledger = await ready_ledger(redis_scope)
    await ledger.queue.enqueue("w", "1")
    until_tomorrow = Candidate("w", "pod-w", (), (), wait=(86_400.0, "DisruptionWindow", "waiting"))
    verdicts = await ledger.admit_batch([until_tomorrow], from_queue=True)
    assert verdicts is not None and verdicts[0].outcome == "deferred"
    wait = await ledger.queue.tick()
    assert wait is not None and wait > 86_000 and await ledger.queue.head(10) == []
    assert await ledger.queue.tick(rewind=True) is None  # windows configured otherwise: looked at again now
    assert await ledger.queue.head(10) == ["w"]


async def test_thousands_blocked_do_not_starve_one_that_fits(redis_scope: RedisScope) -> None:
    """The defect a 256-deep scan had: with more blocked jobs than one pass looks at, a job behind them
    that fits was never admitted."""
    ledger = await ready_ledger(redis_scope)
    assert (await ledger.admit("holder", "pod-h", NODE_A, buckets=[])).admitted
    blocked = [(f"b{i:05d}", f"0{i:05d}") for i in range(3000)]
    await queue_jobs(ledger, *blocked, ("fits", "1"))
    plans = {job: NODE_A for job, _ in blocked} | {"fits": ()}
    rounds = 0
    outcomes: dict[str, str] = {}
    while head := await ledger.queue.head(256):
        candidates = [Candidate(job, f"pod-{job}", plans[job], ()) for job in head]
        verdicts = await ledger.admit_batch(candidates, from_queue=True)
        assert verdicts is not None
        outcomes.update({job: v.outcome for job, v in zip(head, verdicts, strict=True)})
        rounds += 1
    assert outcomes["fits"] == "admitted"
    assert rounds == 12  # each job looked at once: ceil(3001 / 256)
    assert len(await ledger.queue.parked()) == 3000


async def ready_pods(ledger: Ledger, key: str) -> set[str]:
    return {as_text(m) for m in await ledger.client.smembers(ledger.keys.member("ready", key))}


async def test_a_workloads_ready_pods_follow_the_newest_event_of_each_pod(redis_scope: RedisScope) -> None:
    ledger = await ready_ledger(redis_scope)
    w = "workload:StatefulSet/ns/db"
    assert await ledger.pod_ready("ns/db-0", "5", "u1", ready=True, workload_key=w, deleted=False)
    assert await ready_pods(ledger, w) == {"u1"}
    assert not await ledger.pod_ready(
        "ns/db-0", "4", "u1", ready=False, workload_key=w, deleted=False
    )  # older: changes nothing
    assert await ready_pods(ledger, w) == {"u1"}
    # The same name holds another pod now (a StatefulSet's replacement): the old one leaves the set.
    assert await ledger.pod_ready("ns/db-0", "6", "u2", ready=False, workload_key=w, deleted=False)
    assert await ready_pods(ledger, w) == set()
    assert await ledger.pod_ready("ns/db-0", "7", "u2", ready=True, workload_key=w, deleted=False)
    assert await ready_pods(ledger, w) == {"u2"}
    assert await ledger.pod_ready(
        "ns/db-0", "8", "u2", ready=True, workload_key=w, deleted=True
    )  # deleted, whatever it last said
    assert await ready_pods(ledger, w) == set()
    assert not await ledger.pod_ready(
        "ns/db-0", "7", "u2", ready=True, workload_key=w, deleted=False
    )  # a late event: still gone
    assert await ready_pods(ledger, w) == set()
    await redis_scope.client.delete(ledger.keys.member("ready", w))  # Redis lost the set ...
    assert await ledger.pod_ready("ns/db-1", "9", "u3", ready=True, workload_key=w, deleted=False)
    assert await ledger.pod_ready(
        "ns/db-1", "9", "u3", ready=True, workload_key=w, deleted=False
    )  # ... a replay refills it
    assert await ready_pods(ledger, w) == {"u3"}


async def test_a_pod_becoming_ready_wakes_a_job_waiting_on_its_workloads_unavailability(
    redis_scope: RedisScope,
) -> None:
    ledger = await ready_ledger(redis_scope)
    w = "workload:Deployment/ns/web"
    for i in range(3):  # 4 replicas, 3 Ready: with maxUnavailable 1, nothing may go
        assert await ledger.pod_ready(
            f"ns/web-{i}", "1", f"pod-web-{i}", ready=True, workload_key=w, deleted=False
        )
    unavailable = (Slot("maxUnavailablePerWorkload", w, 1, "workload web", replicas=4),)
    await queue_jobs(ledger, ("j1", "1"))
    candidates = [Candidate("j1", "pod-web-0", unavailable, ())]
    verdicts = await ledger.admit_batch(candidates, from_queue=True)
    assert verdicts is not None and verdicts[0].outcome == "deferred"
    assert (
        verdicts[0].message == "deferred: maxUnavailablePerWorkload 1/1 on workload web (1 more unavailable)"
    )
    assert await ledger.queue.parked() == {"j1": f"slot:{w}"}
    assert await ledger.pod_ready(
        "ns/web-3", "2", "pod-web-3", ready=False, workload_key=w, deleted=False
    )  # not Ready yet: no room
    assert await ledger.queue.head(10) == []
    assert await ledger.pod_ready(
        "ns/web-3", "3", "pod-web-3", ready=True, workload_key=w, deleted=False
    )  # Ready: j1 is looked at
    assert await ledger.queue.head(10) == ["j1"]
    verdicts = await ledger.admit_batch(candidates, from_queue=True)
    assert verdicts is not None and verdicts[0].outcome == "admitted"


async def test_a_job_whose_pod_went_counts_once_for_the_missing_replica(redis_scope: RedisScope) -> None:
    ledger = await ready_ledger(redis_scope)
    w = "workload:Deployment/ns/web"
    for i in range(4):
        assert await ledger.pod_ready(
            f"ns/web-{i}", "1", f"pod-web-{i}", ready=True, workload_key=w, deleted=False
        )
    unavailable = [Slot("maxUnavailablePerWorkload", w, 2, "workload web", replicas=4)]
    assert (await ledger.admit("j0", "pod-web-0", unavailable, buckets=[])).admitted
    assert await ledger.pod_ready(
        "ns/web-0", "2", "pod-web-0", ready=False, workload_key=w, deleted=True
    )  # evicted and gone
    assert await ledger.pod_ready(
        "ns/web-9", "3", "pod-web-9", ready=False, workload_key=w, deleted=False
    )  # its replacement, not Ready
    # One replica missing, one job in flight for it: one unavailable, so one more may go ...
    assert (await ledger.admit("j1", "pod-web-1", unavailable, buckets=[])).admitted
    # ... and then none: two in flight.
    third = await ledger.admit("j2", "pod-web-2", unavailable, buckets=[])
    assert third.message == "deferred: maxUnavailablePerWorkload 2/2 on workload web (0 more unavailable)"
    # The replacement is Ready but j0 has not ended: it still counts, once.
    assert await ledger.pod_ready("ns/web-9", "4", "pod-web-9", ready=True, workload_key=w, deleted=False)
    assert not (await ledger.admit("j2", "pod-web-2", unavailable, buckets=[])).admitted
    assert await ledger.release("j0")
    assert (await ledger.admit("j2", "pod-web-2", unavailable, buckets=[])).admitted
