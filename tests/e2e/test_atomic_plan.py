"""An atomic plan (`podherd rebalance --atomic`) whose moves cannot all be held: each job reserves its room
ahead, paused; one never gets it; when the plan's timeout passes, every job is aborted, every Reservation
released, and no pod was evicted. (Its success, every move held and then made, is in test_rebalance.py.)"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from kubesim.sim import SimHandle
from podherd.client import Sender, gather_replies, nats_client
from podherd.harness.servers import Server
from shared import bus
from shared.rebalance.intents import move_intents
from shared.rebalance.planning import Move
from tests.e2e.pipeline import (
    GROUP,
    PLURAL,
    VERSION,
    audit_order,
    ended,
    pipeline,
    pipeline_config,
    until_job,
)
from tests.e2e.test_drain import FULL, NODE
from tests.e2e.test_lifecycle import start, until_no_reservations

pytestmark = [pytest.mark.e2e, pytest.mark.integration]


async def test_an_atomic_plan_without_room_for_every_move_evicts_nothing(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    kube = start(kubesim_factory, FULL)
    pods = kube.core.list_namespaced_pod("default").items
    before = {p.metadata.name: p.metadata.uid for p in pods}
    # node-3 has half a CPU left: room for small, none for big.
    moving = sorted(p.metadata.name for p in pods if p.spec.node_name == NODE)
    moves = [Move(f"default/{name}", None, NODE, "node-3", "to node-3") for name in moving]
    config = pipeline_config(kube.handle, nats_srv, redis_srv, test_id)
    intents = move_intents(moves, requester="tests", kind="rebalance", reason="test", atomic_timeout="3s")
    async with pipeline(config):
        async with nats_client(config) as nc:
            replies = await gather_replies(nc, Sender.of(config), intents, within=30)
        assert all(r.ok and r.job for r in replies), replies
        finished = [await until_job(kube, str(r.job), ended, within=60) for r in replies]
        await asyncio.to_thread(until_no_reservations, kube)
    after = {p.metadata.name: p.metadata.uid for p in kube.core.list_namespaced_pod("default").items}
    assert after == before  # nothing evicted
    assert {j["status"]["phase"] for j in finished} == {"Aborted"}
    (big,) = (name for name in moving if name.startswith("big"))
    atomic = intents[0].atomic_plan
    assert atomic is not None
    messages = {j["status"]["message"] for j in finished}
    assert len(messages) == 1 and f"atomic plan {atomic.name} rolled back" in messages.pop()
    records = await audit_order(nats_srv.url, bus.Subjects(test_id))
    plan = [r for r in records if r.action == "plan"]
    assert [r.details.get("phase") for r in plan] == ["RolledBack"]
    assert plan[0].message and f"default/{big}: " in plan[0].message
    jobs = kube.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)["items"]
    assert len(jobs) == len(moving)


async def test_an_atomic_plan_moves_only_once_every_move_has_room(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    kube = start(kubesim_factory, FULL)
    kube.apps.delete_namespaced_deployment("filler", "default")  # node-3 has room for both now
    pods = kube.core.list_namespaced_pod("default").items
    moving = sorted(
        p.metadata.name for p in pods if p.spec.node_name == NODE and "filler" not in p.metadata.name
    )
    moves = [Move(f"default/{name}", None, NODE, "node-3", "to node-3") for name in moving]
    config = pipeline_config(kube.handle, nats_srv, redis_srv, test_id)
    intents = move_intents(moves, requester="tests", kind="rebalance", reason="test", atomic_timeout="60s")
    async with pipeline(config):
        async with nats_client(config) as nc:
            replies = await gather_replies(nc, Sender.of(config), intents, within=30)
        finished = [await until_job(kube, str(r.job), ended, within=60) for r in replies]
        await asyncio.to_thread(until_no_reservations, kube)
    assert {j["status"]["phase"] for j in finished} == {"Succeeded"}
    left = kube.core.list_namespaced_pod("default", field_selector=f"spec.nodeName={NODE}").items
    assert left == []
    # Every move's room was reserved before any of them was admitted.
    records = await audit_order(nats_srv.url, bus.Subjects(test_id))
    moving_at = next(
        i for i, r in enumerate(records) if r.action == "plan" and r.details.get("phase") == "Moving"
    )
    jobs = {str(r.job) for r in replies}
    running: dict[str, int] = {}
    for i, r in enumerate(records):
        if r.job in jobs and r.action == "transition" and r.phase == "Running":
            running.setdefault(r.job or "", i)
    assert len(running) == len(jobs) and moving_at < min(running.values())
