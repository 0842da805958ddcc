"""An atomic plan (`podherd rebalance --atomic`): each job reserves its room ahead, paused. When one move
never gets room, the plan's timeout rolls the whole plan back: every job aborted, every Reservation
released, no pod evicted. Once there is room for every move, the same moves as a new plan all go, and
none was admitted before every one had its room."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from kubesim.sim import SimHandle
from podherd.client import Sender, gather_replies, nats_client
from podherd.harness.servers import Server
from shared.api.messages import AuditRecord, MigrationIntent
from shared.config.model import PodherdConfig
from shared.nats import bus
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
from tests.kube import Kube

pytestmark = [pytest.mark.e2e, pytest.mark.integration]


async def carried(kube: Kube, config: PodherdConfig, intents: list[MigrationIntent]) -> list[dict[str, Any]]:
    """The intents sent, and their jobs once each has ended (and every Reservation is gone)."""
    async with nats_client(config) as nc:
        replies = await gather_replies(nc, Sender.of(config), intents, within=30)
    assert all(r.ok and r.job for r in replies), replies
    finished = [await until_job(kube, str(r.job), ended, within=60) for r in replies]
    await asyncio.to_thread(until_no_reservations, kube)
    return finished


async def test_an_atomic_plan_moves_all_or_nothing(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    kube = start(kubesim_factory, FULL)
    pods = kube.core.list_namespaced_pod("default").items
    before = {p.metadata.name: p.metadata.uid for p in pods}
    # node-3 has half a CPU left: room for small, none for big.
    moving = sorted(p.metadata.name for p in pods if p.spec.node_name == NODE)
    moves = [Move(f"default/{name}", None, NODE, "node-3", "to node-3") for name in moving]
    config = pipeline_config(kube.handle, nats_srv, redis_srv, test_id)
    first = move_intents(moves, requester="tests", kind="first", reason="test", atomic_timeout="3s")
    again = move_intents(moves, requester="tests", kind="again", reason="test", atomic_timeout="60s")
    async with pipeline(config):
        rolled_back = await carried(kube, config, first)
        after = {p.metadata.name: p.metadata.uid for p in kube.core.list_namespaced_pod("default").items}
        kube.apps.delete_namespaced_deployment("filler", "default")  # node-3 has room for both now
        moved = await carried(kube, config, again)
    records = await audit_order(nats_srv.url, bus.Subjects(test_id))
    plans = [r for r in records if r.action == "plan"]

    # Without room for big: both jobs aborted, nothing evicted, the plan's one record names why.
    assert after == before
    assert {j["status"]["phase"] for j in rolled_back} == {"Aborted"}
    plan = first[0].atomic_plan
    assert plan is not None
    assert len({j["status"]["message"] for j in rolled_back}) == 1
    (big,) = (name for name in moving if name.startswith("big"))
    assert [r.details.get("phase") for r in plans] == ["RolledBack", "Moving"]
    assert plans[0].message and f"atomic plan {plan.name} rolled back" in plans[0].message
    assert f"default/{big}: " in plans[0].message
    # With room: both moved, and none was admitted before every one had its room.
    assert {j["status"]["phase"] for j in moved} == {"Succeeded"}
    assert kube.core.list_namespaced_pod("default", field_selector=f"spec.nodeName={NODE}").items == []
    jobs = {str(j["metadata"]["name"]) for j in moved}
    assert again[0].atomic_plan is not None and plans[1].details.get("plan") == again[0].atomic_plan.name
    moving_at = records.index(plans[1])
    assert moving_at < min(_first_running(records, jobs).values())
    assert len(kube.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)["items"]) == 2 * len(moving)


def _first_running(records: list[AuditRecord], jobs: set[str]) -> dict[str, int]:
    running: dict[str, int] = {}
    for i, r in enumerate(records):
        if r.job in jobs and r.action == "transition" and r.phase == "Running":
            running.setdefault(r.job or "", i)
    assert set(running) == jobs
    return running
