"""How the comparison with Koordinator's controller reads what it saw: a job's conditions stage by stage and
its Reservation's fate (tests/koordinator), the benchmark's outcomes job by job and its table
(bench.side_by_side)."""

from __future__ import annotations

from typing import Any, cast

from bench.side_by_side import compare, table
from shared.kube.client import KubeClient
from tests.koordinator.trace import Recorder, Seen, staged


def test_conditions_of_one_stage_compare_in_any_order_and_a_stage_out_of_order_shows() -> None:
    koordinator = [
        "ReservationCreated",
        "ReservationScheduled",
        "Eviction",
        "ReservationBound",
        "BoundPodReady",
    ]
    podherd = ["ReservationCreated", "ReservationScheduled", "Eviction", "BoundPodReady", "ReservationBound"]
    assert staged(koordinator) == staged(podherd)
    assert staged(koordinator)[-1] == ("BoundPodReady", "ReservationBound")
    evicted_first = ["Eviction", "ReservationCreated", "ReservationScheduled"]
    assert staged(evicted_first) != staged(["ReservationCreated", "ReservationScheduled", "Eviction"])


def _recorder(*events: tuple[str, str, dict[str, Any]]) -> Recorder:
    recorder = Recorder(cast(KubeClient, None), "ns")
    for at, (kind, type_, obj) in enumerate(events):
        recorder.seen.append(Seen(float(at), kind, type_, obj))
    return recorder


def _job(reservation: str | None) -> dict[str, Any]:
    options = {"reservationRef": {"name": reservation}} if reservation else {}
    return {"metadata": {"name": "j"}, "spec": {"podRef": {"name": "p"}, "reservationOptions": options}}


def _room(phase: str) -> dict[str, Any]:
    return {"metadata": {"name": "r"}, "status": {"phase": phase}}


def test_a_reservation_taken_is_consumed_whether_it_is_then_deleted_or_left() -> None:
    taken = ("reservation", "MODIFIED", _room("Succeeded"))
    left = _recorder(("job", "ADDED", _job("r")), ("reservation", "ADDED", _room("Available")), taken)
    deleted = _recorder(("job", "ADDED", _job("r")), taken, ("reservation", "DELETED", _room("Succeeded")))
    assert left.reservation_fate("j") == deleted.reservation_fate("j") == "consumed"


def test_a_reservation_never_taken_is_unused_whether_deleted_or_expired_or_left_and_none_is_none() -> None:
    expired = _recorder(("job", "ADDED", _job("r")), ("reservation", "MODIFIED", _room("Failed")))
    assert expired.reservation_fate("j") == "unused"
    released = _recorder(
        ("job", "ADDED", _job("r")),
        ("reservation", "ADDED", _room("Available")),
        ("reservation", "DELETED", _room("Available")),
    )
    left = _recorder(("job", "ADDED", _job("r")), ("reservation", "ADDED", _room("Available")))
    assert released.reservation_fate("j") == "unused"
    assert left.reservation_fate("j") == "left unused" and not left.settled(["j"])
    assert _recorder(("job", "ADDED", _job(None))).reservation_fate("j") == "none"


def _run(controller: str, by_job: dict[str, str]) -> dict[str, Any]:
    return {
        "controller": controller,
        "run": "open",
        "jobs": len(by_job),
        "by_job": by_job,
        "outcomes": {},
        "makespan_s": 1.0,
        "jobs_per_s": 1.0,
        "latency_s_p50": 1.0,
        "latency_s_p99": 1.0,
        "admission_ms_p50": 1.0,
        "admission_ms_p99": 2.0,
        "cpu_ms_per_job": 3.0,
        "control_plane_cpu_ms_per_job": 4.0,
        "control_plane_cpu_ms_per_job_over_idle": 2.0,
        "peak_rss_mb": 5.0,
    }


def test_outcomes_are_compared_job_by_job_and_each_run_is_a_row() -> None:
    theirs = _run("koordinator", {"a": "Succeeded", "b": "Failed/Timeout", "c": "Succeeded"})
    ours = _run("podherd", {"a": "Succeeded", "b": "Succeeded", "c": "Failed/Timeout"})
    assert compare([theirs]) == []  # the other controller's run is still to come
    (compared,) = compare([theirs, ours])
    assert compared == {
        "run": "open 3",
        "jobs": 3,
        "same": 1,
        "koordinator_succeeded_podherd_not": 1,
        "podherd_succeeded_koordinator_not": 1,
    }
    rows = table({"runs": [theirs, ours]})
    assert len(rows) == 4 and rows[2].startswith("| open 3 | koordinator |") and "| 4.0 (2.0) |" in rows[3]
