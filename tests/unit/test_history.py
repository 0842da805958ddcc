"""The watchdog's history invariants, replayed from hand-made watch events: pure, no servers."""

from __future__ import annotations

from typing import Any

import pytest

from podherd.watchdog.history import JOB, POD, RESERVATION, History, RoomCheck, replay


def pod(rv: int, node: str = "node-1", evicted: bool = False, uid: str = "u1") -> dict[str, Any]:
    conditions = [{"type": "Ready", "status": "True"}]
    if evicted:
        conditions.append({"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"})
    return {
        "metadata": {"namespace": "default", "name": "web-0", "uid": uid, "resourceVersion": str(rv)},
        "spec": {"nodeName": node},
        "status": {"conditions": conditions},
    }


def room(rv: int, phase: str, node: str = "", owners: int = 0) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase, "nodeName": node or None}
    if owners:
        status["currentOwners"] = [{"namespace": "default", "name": "web-9", "uid": "u9"}] * owners
    return {"metadata": {"name": "j", "resourceVersion": str(rv)}, "status": status}


def job(rv: int, phase: str | None = None, mode: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"podRef": {"namespace": "default", "name": "web-0"}}
    if mode:
        spec["mode"] = mode
    return {"metadata": {"name": "j", "resourceVersion": str(rv)}, "spec": spec, "status": {"phase": phase}}


def story(mode: str | None = None) -> History:
    """A pod, its job, the job's Reservation scheduled at 12 and taken at 20; the pod evicted at 15 and gone
    at 18. Events arrive out of order (three watches), as they do."""
    h = History()
    h.add(RESERVATION, "ADDED", room(10, "Pending"))
    h.add(RESERVATION, "MODIFIED", room(12, "Available", "node-2"))
    h.add(RESERVATION, "MODIFIED", room(20, "Succeeded", "node-2", owners=1))
    h.add(POD, "ADDED", pod(5))
    h.add(POD, "MODIFIED", pod(15, evicted=True))
    h.add(POD, "DELETED", pod(18, evicted=True))
    h.add(JOB, "ADDED", job(6, mode=mode))
    h.add(JOB, "MODIFIED", job(7, "Running", mode=mode))
    return h


def check(rv: int) -> RoomCheck:
    return RoomCheck(job="j", reservation="j", resource_version=rv, node="node-2")


def test_an_eviction_after_reading_the_room_available_holds() -> None:
    h = story()
    h.add(JOB, "MODIFIED", job(22, "Succeeded"))
    found = replay(h, [check(12)], "ReservationFirst")
    assert (found.evictions_checked, found.evictions_without_room, found.succeeded_before_gone) == (1, [], [])


@pytest.mark.parametrize(
    ("checks", "why"),
    [
        ([], "no check"),
        ([check(11)], "j@11"),  # read while still Pending
        ([check(21)], "j@21"),  # read after the eviction (and taken by then)
    ],
)
def test_an_eviction_without_a_room_read_available_before_it_is_found(
    checks: list[RoomCheck], why: str
) -> None:
    found = replay(story(), checks, "ReservationFirst")
    assert len(found.evictions_without_room) == 1
    assert "j: default/web-0 (uid u1) evicted at resourceVersion 15" in found.evictions_without_room[0]
    assert why in found.evictions_without_room[0]


def test_room_taken_or_on_the_pods_own_node_is_no_room() -> None:
    h = story()
    h.add(RESERVATION, "MODIFIED", room(13, "Available", "node-2", owners=1))  # a sibling took it first
    assert replay(h, [check(13)], "ReservationFirst").evictions_without_room
    h = story()
    h.add(RESERVATION, "MODIFIED", room(13, "Available", "node-1"))
    assert replay(h, [check(13)], "ReservationFirst").evictions_without_room


def test_evict_directly_and_other_evictions_are_not_held_to_a_room() -> None:
    assert replay(story("EvictDirectly"), [], "ReservationFirst").evictions_checked == 0
    assert replay(story(), [], "EvictDirectly").evictions_checked == 0  # the configured default
    h = story()
    h.add(JOB, "MODIFIED", job(14, "Failed"))  # ended before someone else evicted the pod
    assert replay(h, [], "ReservationFirst").evictions_checked == 0


def test_succeeded_while_the_old_pod_still_exists_is_found() -> None:
    h = story()
    h.add(JOB, "MODIFIED", job(17, "Succeeded"))  # the pod is deleted at 18
    found = replay(h, [check(12)], "ReservationFirst")
    assert found.succeeded_before_gone == [
        "j: Succeeded at resourceVersion 17 while default/web-0 (uid u1) exists"
    ]
    h = story()
    h.add(POD, "ADDED", pod(16, node="node-2", uid="u2"))  # a new pod by the same name is not the old one
    h.add(JOB, "MODIFIED", job(19, "Succeeded"))
    assert replay(h, [check(12)], "ReservationFirst").succeeded_before_gone == []
