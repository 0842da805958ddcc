"""A node drain's plan (kubectl drain's rules and words), and the filters a drain lifts for its own jobs."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import msgspec
import pytest
from msgspec.structs import replace

from services.tracker.jobs.machine import RESERVE, progress
from shared.api.drain import MOVING, RESERVING, ROLLED_BACK, DrainOptions, drain_job_name, lifts_of, node_hash
from shared.api.meta import ObjectMeta, ObjectReference
from shared.api.names import ANNOTATION_ATOMIC, ANNOTATION_LIFTS
from shared.api.pmj import PodMigrationJob, PodMigrationJobSpec
from shared.intake.drain_plan import Room, atomic_step, plan_drain
from shared.rules import filters
from shared.rules.facts import facts_of, queued_facts, queued_record
from tests.unit.test_arbitration_rules import JOB, POD, WORKLOAD, args
from tests.unit.test_job_progress import NOW, job, reservation, seen

SCHEDULERS = ["koord-scheduler"]
RS = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": "rs", "controller": True}
DS = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "ds", "controller": True}


def pod(
    name: str, *, owner: dict[str, Any] | None = RS, phase: str = "Running", **extra: Any
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": f"uid-{name}"}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    meta.update(extra.pop("meta", {}))
    spec = {"schedulerName": "koord-scheduler", "containers": [{"name": "c"}], **extra}
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


def test_replicated_pods_move_reservation_first_and_what_stays_says_why() -> None:
    pods = [
        pod("web"),
        pod("agent", owner=DS),
        pod("mirror", meta={"annotations": {"kubernetes.io/config.mirror": "x"}}),
        pod("done", phase="Succeeded", owner=None),
        pod("going", meta={"deletionTimestamp": "2026-11-25T00:00:00Z"}),
    ]
    plan = plan_drain(pods, DrainOptions(ignore_daemonsets=True), scheduler_names=SCHEDULERS)
    assert [(m.key, m.mode, m.lifts) for m in plan.moves] == [
        ("default/web", "ReservationFirst", frozenset())
    ]
    assert plan.stays == {
        "default/agent": "DaemonSet-managed",
        "default/mirror": "a mirror pod",
        "default/done": "Succeeded: holds nothing",
        "default/going": "already terminating",
    }
    assert plan.errors() == []
    assert plan.warnings() == ["ignoring DaemonSet-managed Pods: default/agent"]


def test_without_its_flag_each_kind_of_pod_refuses_the_drain_naming_the_pods() -> None:
    pods = [
        pod("agent", owner=DS),
        pod("scratch", volumes=[{"name": "v", "emptyDir": {}}]),
        pod("bare", owner=None),
        pod("bare-2", owner=None),
        pod("web"),
    ]
    plan = plan_drain(pods, DrainOptions(), scheduler_names=SCHEDULERS)
    assert plan.errors() == [
        "cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore): default/agent",
        "cannot delete Pods with local storage (use --delete-emptydir-data to override): default/scratch",
        "cannot delete Pods that declare no controller (use --force to override): "
        "default/bare, default/bare-2",
    ]


def test_the_flags_let_them_go_each_with_its_strategy_and_the_filters_it_lifts() -> None:
    pods = [
        pod("scratch", volumes=[{"name": "v", "emptyDir": {}}]),
        pod("bare", owner=None),
        pod("elsewhere", schedulerName="default-scheduler"),
    ]
    options = DrainOptions(ignore_daemonsets=True, delete_emptydir_data=True, force=True)
    plan = plan_drain(pods, options, scheduler_names=SCHEDULERS)
    assert plan.errors() == []
    moves = {m.name: m for m in plan.moves}
    assert (moves["scratch"].mode, moves["scratch"].lifts) == (
        "ReservationFirst",
        frozenset({"LocalStorage"}),
    )
    assert (moves["bare"].mode, moves["bare"].lifts) == ("EvictDirectly", frozenset({"BarePod"}))
    assert "nothing would recreate it" in moves["bare"].why
    assert moves["elsewhere"].mode == "EvictDirectly"
    assert (
        moves["elsewhere"].why
        == "its scheduler default-scheduler is not one of schedulerNames (koord-scheduler)"
    )
    assert plan.warnings() == [
        "deleting Pods with local storage: default/scratch",
        "deleting Pods that declare no controller: default/bare",
    ]


def test_finished_pods_of_a_daemonset_or_with_local_storage_need_no_flag() -> None:
    pods = [
        pod("old-agent", owner=DS, phase="Failed"),
        pod("old", phase="Succeeded", volumes=[{"emptyDir": {}}]),
    ]
    plan = plan_drain(pods, DrainOptions(), scheduler_names=SCHEDULERS)
    assert plan.errors() == [] and plan.moves == []


def test_names_fit_their_places() -> None:
    node = "ip-10-0-0-1." + "a" * 200 + ".compute.internal"
    assert len(node_hash(node)) <= 63 and node_hash(node) == node_hash(node) != node_hash(node + "x")
    assert drain_job_name(node, "u1") == drain_job_name(node, "u1") != drain_job_name(node, "u2")
    assert len(drain_job_name(node, "u1")) <= 63
    assert lifts_of({ANNOTATION_LIFTS: "LocalStorage, BarePod,ExpectedReplicas"}) == {
        "LocalStorage",
        "BarePod",
    }


# ---------------------------------------------------------------------------------------------------------
# The arbitrator's filters, lifted for a drain's own jobs only


def test_a_drain_lifts_the_local_storage_filter_for_emptydir_only() -> None:
    emptydir = replace(POD, volume_kinds=("emptyDir",))
    hostpath = replace(POD, volume_kinds=("emptyDir", "hostPath"))
    lifted = replace(JOB, lifts=frozenset({"LocalStorage"}))
    config = args()
    assert filters.evaluate(JOB, emptydir, WORKLOAD, args=config) is not None
    assert filters.evaluate(lifted, emptydir, WORKLOAD, args=config) is None
    refused = filters.evaluate(lifted, hostpath, WORKLOAD, args=config)
    assert refused is not None and refused.message.startswith("LocalStorage:")


def test_a_forced_drain_lifts_the_bare_pod_filter() -> None:
    bare = replace(POD, owner=None)
    refused = filters.evaluate(JOB, bare, None, args=args())
    assert refused is not None and refused.message.startswith("BarePods:")
    assert filters.evaluate(replace(JOB, lifts=frozenset({"BarePod"})), bare, None, args=args()) is None


@pytest.mark.parametrize("lifts", [frozenset(), frozenset({"BarePod", "LocalStorage"})])
def test_the_lifts_survive_the_queue_and_an_older_replicas_record_still_reads(lifts: frozenset[str]) -> None:
    job = PodMigrationJob(
        metadata=ObjectMeta(name="j", uid="u", annotations={ANNOTATION_LIFTS: ",".join(sorted(lifts))}),
        spec=PodMigrationJobSpec(pod_ref=ObjectReference(namespace="default", name="p")),
    )
    facts = facts_of(job, "ReservationFirst")
    assert facts.lifts == lifts
    assert queued_facts(queued_record(facts), "ReservationFirst") == facts
    older = b'["j","u","default","p","ReservationFirst",0.0,0]'
    assert queued_facts(older, "ReservationFirst").lifts == frozenset()


def test_an_atomic_drain_moves_once_every_pod_has_room_and_rolls_back_at_its_deadline() -> None:
    placed = Room("default/a", placed=True)
    waiting = Room("default/b", placed=False, why="0/3 nodes are available: 3 Insufficient cpu.")
    assert atomic_step([placed, Room("default/c", placed=True)], now=200.0, deadline=100.0) == (MOVING, [])
    assert atomic_step([placed, waiting], now=99.0, deadline=100.0) == (RESERVING, [])
    assert atomic_step([placed, waiting], now=100.0, deadline=100.0) == (
        ROLLED_BACK,
        ["default/b: 0/3 nodes are available: 3 Insufficient cpu."],
    )
    assert atomic_step([Room("default/d", placed=False)], now=101.0, deadline=100.0)[1] == [
        "default/d: no room found"
    ]


def test_an_atomic_drains_job_reserves_its_room_then_waits_paused() -> None:
    atomic = msgspec.structs.replace(
        job(paused=True, ttl="1s"),
        metadata=msgspec.structs.replace(job().metadata, annotations={ANNOTATION_ATOMIC: "true"}),
    )
    long_after = NOW + timedelta(hours=1)  # its ttl long past: the drain's deadline holds, not the job's
    first = progress(seen(job=atomic, admitted=False, now=long_after))
    assert (first.status.phase, first.actions) == ("Pending", (RESERVE,))
    asked = progress(seen(job=atomic, admitted=False, now=long_after, asked=1))
    assert asked.actions == () and asked.status.message == "reserving room ahead of the drain"
    room = reservation("Available", "node-2")
    placed = progress(seen(job=atomic, admitted=False, reservation=room, asked=1))
    assert (
        placed.status.message == "room reserved on node node-2; moving once every pod of the drain has room"
    )
    assert placed.actions == ()
    full = reservation("Pending", None, unschedulable="0/3 nodes are available")
    assert (
        progress(seen(job=atomic, reservation=full, asked=1)).status.message
        == "no room yet: 0/3 nodes are available"
    )
