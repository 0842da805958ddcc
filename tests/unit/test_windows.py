"""Disruption windows, with the clock injected: when a window is open, when it opens next (time zones and
DST included), which jobs it gates, how the arbitrator parks a job until it opens, and how the tracker
writes the wait into the status and counts the job's ttl from the opening."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from podherd.client import job_rows
from services.arbitrator.candidates import RULE_WINDOW, WINDOW_SLACK, candidate
from services.arbitrator.gather import Loaded
from services.tracker.jobs import deadlines
from services.tracker.jobs.machine import RESERVE, progress
from shared.api.messages import WindowOpening
from shared.api.pmj import (
    COND_DISRUPTION_WINDOW,
    PHASE_FAILED,
    PHASE_PENDING,
    PHASE_RUNNING,
    PodMigrationJob,
    PodMigrationJobStatus,
)
from shared.config.loader import config_from_dict
from shared.config.model import ConfigError, DisruptionWindow
from shared.config.windows import Closed, Open, Windows, next_opening, open_at
from tests.unit.test_arbitration_rules import JOB, POD, WORKLOAD, args, pod
from tests.unit.test_job_progress import NOW, job, seen


def window(**fields: Any) -> DisruptionWindow:
    document = {"schedule": "0 2 * * *", "duration": "2h", **fields}
    return config_from_dict(
        {"migrationController": {"disruptionWindows": [document]}}
    ).migration_controller.disruption_windows[0]


def with_status(j: PodMigrationJob, status: PodMigrationJobStatus) -> PodMigrationJob:
    return msgspec.structs.replace(j, status=status)


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)  # type: ignore[arg-type,misc]


# ---------------------------------------------------------------------------------------------------------
# The window's clock


def test_a_nightly_window_is_open_from_its_schedule_for_its_duration() -> None:
    nightly = window()
    assert open_at(nightly, utc(2026, 11, 25, 1, 59, 59)) is None
    opened = open_at(nightly, utc(2026, 11, 25, 2, 0))
    assert opened is not None and (opened.opens_at, opened.closes_at) == (
        utc(2026, 11, 25, 2),
        utc(2026, 11, 25, 4),
    )
    assert open_at(nightly, utc(2026, 11, 25, 3, 59, 59)) == opened
    assert open_at(nightly, utc(2026, 11, 25, 4, 0)) is None  # closed at its end
    assert next_opening(nightly, utc(2026, 11, 25, 4, 0)).opens_at == utc(2026, 11, 26, 2)
    assert next_opening(nightly, utc(2026, 11, 25, 2, 0)).opens_at == utc(2026, 11, 26, 2)


def test_the_schedule_is_read_in_its_time_zone_across_daylight_saving_time() -> None:
    berlin = window(timeZone="Europe/Berlin", schedule="30 2 * * *", duration="1h")
    # Winter: 02:30 CET is 01:30 UTC; summer: 02:30 CEST is 00:30 UTC.
    assert next_opening(berlin, utc(2026, 1, 10)).opens_at == utc(2026, 1, 10, 1, 30)
    assert next_opening(berlin, utc(2026, 7, 10)).opens_at == utc(2026, 7, 10, 0, 30)
    # 2026-03-29: clocks jump from 02:00 to 03:00; 02:30 does not exist: it fires at 03:00 CEST (01:00 UTC).
    assert next_opening(berlin, utc(2026, 3, 28, 23)).opens_at == utc(2026, 3, 29, 1)
    # 2026-10-25: 02:30 happens twice; the window opens once.
    openings = []
    at = utc(2026, 10, 24, 22)
    for _ in range(2):
        at = next_opening(berlin, at).opens_at
        openings.append(at)
    assert openings == [utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)]


def test_weekday_schedules_and_shorthands() -> None:
    weekdays = window(schedule="0 22 * * MON-FRI", duration="8h")
    friday_night = utc(2026, 11, 27, 23)  # a Friday
    assert open_at(weekdays, friday_night) is not None
    assert next_opening(weekdays, friday_night).opens_at == utc(2026, 11, 30, 22)  # Monday
    assert next_opening(window(schedule="@daily", duration="1h"), utc(2026, 11, 25, 12)).opens_at == utc(
        2026, 11, 26
    )


def test_six_fields_name_the_second_first() -> None:
    every_half_minute = window(schedule="15,45 * * * * *", duration="10s")
    assert next_opening(every_half_minute, utc(2026, 11, 25, 12)).opens_at == utc(2026, 11, 25, 12, 0, 15)
    assert open_at(every_half_minute, utc(2026, 11, 25, 12, 0, 20)) is not None
    assert open_at(every_half_minute, utc(2026, 11, 25, 12, 0, 30)) is None


@pytest.mark.parametrize(
    ("fields", "key", "words"),
    [
        ({"schedule": "0 2 * *"}, "schedule", "five fields, or six with seconds first"),
        ({"schedule": "0 2 31 2 *"}, "schedule", "not a cron expression"),
        ({"timeZone": "Europe/Atlantis"}, "timeZone", "unknown time zone"),
        ({"duration": "0s"}, "duration", "positive duration"),
        (
            {"labelSelector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}},
            "labelSelector.matchExpressions[0].operator",
            "Near",
        ),
    ],
)
def test_a_bad_window_is_refused_at_start_naming_its_field(
    fields: dict[str, Any], key: str, words: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        window(**fields)
    assert raised.value.key == f"migrationController.disruptionWindows[0].{key}"
    assert words in raised.value.reason


def test_windows_apply_by_namespace_and_labels_and_the_longest_open_one_wins() -> None:
    batch = window(name="batch", namespaces=["batch"], duration="1h")
    web = window(
        name="web", schedule="0 1 * * *", duration="4h", labelSelector={"matchLabels": {"app": "web"}}
    )
    windows = Windows([batch, web])
    at = utc(2026, 11, 25, 2, 30)
    assert windows.at("default", {"app": "db"}, at) is None  # no window applies: never gated
    assert windows.at("batch", {"app": "db"}, utc(2026, 11, 25, 3, 30)) == Closed(next_opening(batch, at))
    both = windows.at("batch", {"app": "web"}, at)
    assert (
        isinstance(both, Open)
        and both.opening.window == "web"
        and both.opening.closes_at == utc(2026, 11, 25, 5)
    )
    # One open window is enough; when none is, the soonest opening is the one waited for.
    later = windows.at("batch", {"app": "web"}, utc(2026, 11, 25, 6))
    assert isinstance(later, Closed) and later.opening.window == "web"
    assert later.opening.opens_at == utc(2026, 11, 26, 1)


def test_the_cached_state_follows_the_clock_both_ways() -> None:
    windows = Windows([window(name="n")])
    assert isinstance(windows.at("a", {}, utc(2026, 11, 25, 1)), Closed)
    assert isinstance(windows.at("a", {}, utc(2026, 11, 25, 2, 1)), Open)
    assert isinstance(windows.at("a", {}, utc(2026, 11, 25, 4, 1)), Closed)
    assert isinstance(windows.at("a", {}, utc(2026, 11, 25, 3)), Open)  # an earlier time, computed again


# ---------------------------------------------------------------------------------------------------------
# The arbitrator's gate


def loaded(**pod_changes: Any) -> Loaded:
    return Loaded(facts=JOB, pod=pod(**pod_changes), workload=WORKLOAD, pdbs=[])


def test_a_job_whose_window_is_closed_waits_on_the_timer_until_it_opens() -> None:
    windows = Windows([window(name="nightly")])
    now = utc(2026, 11, 25, 20)
    state = windows.at(POD.namespace, POD.labels, now)
    made = candidate("job-1", loaded(), args(), window=state, now=now)
    assert made.wait is not None and made.slots == ()
    seconds, rule, message = made.wait
    assert seconds == pytest.approx(6 * 3600 + WINDOW_SLACK)
    assert rule == RULE_WINDOW
    assert message == (
        "waiting for disruption window nightly: it opens at 2026-11-26T02:00:00Z (until 2026-11-26T04:00:00Z)"
    )


def test_an_open_window_lets_the_limits_decide_and_a_filter_rejects_before_any_window() -> None:
    windows = Windows([window()])
    during = utc(2026, 11, 25, 3)
    made = candidate("job-1", loaded(), args(), window=windows.at("default", {}, during), now=during)
    assert made.wait is None and made.reject is None and made.slots
    closed = windows.at("default", {}, utc(2026, 11, 25, 12))
    mirror = candidate("job-1", loaded(mirror=True), args(), window=closed, now=utc(2026, 11, 25, 12))
    assert mirror.reject is not None and mirror.wait is None


# ---------------------------------------------------------------------------------------------------------
# The tracker: status and ttl

OPENING = WindowOpening(
    window="nightly", opens_at=NOW + timedelta(hours=6), closes_at=NOW + timedelta(hours=8)
)


def test_a_waiting_job_says_when_its_window_opens_and_its_ttl_does_not_run() -> None:
    old = replace(seen(admitted=False, window=OPENING), job=job(ttl="5m"))
    old = replace(old, now=NOW + timedelta(hours=1))  # an hour past creation: well beyond its ttl of 5m
    step = progress(old)
    assert step.status.phase == PHASE_PENDING
    assert step.status.reason == "WaitForDisruptionWindow"
    assert "it opens at" in (step.status.message or "")
    mark = next(c for c in step.status.conditions or [] if c.type == COND_DISRUPTION_WINDOW)
    assert (mark.status, mark.reason) == ("False", "WaitForDisruptionWindow")
    # Looked at again when the window opens, not before.
    assert deadlines.look_again_at(old, step.status) == OPENING.opens_at.timestamp()
    row = job_rows(
        [
            {
                "metadata": {"name": "j"},
                "status": {"reason": step.status.reason, "message": step.status.message},
            }
        ],
        old.now,
    )
    assert row[0][2] == "WaitForDisruptionWindow (opens 2026-11-22T18:00:00Z, in 5h)"


def test_the_ttl_counts_from_the_window_opening_recorded_in_the_status() -> None:
    waiting = replace(seen(admitted=False, window=OPENING), job=job(ttl="5m"))
    waited = replace(waiting, job=with_status(waiting.job, progress(waiting).status))
    opened = replace(waited, now=OPENING.opens_at + timedelta(minutes=1))
    step = progress(opened)  # open, though not admitted yet (the limits hold it)
    mark = next(c for c in step.status.conditions or [] if c.type == COND_DISRUPTION_WINDOW)
    assert (mark.status, mark.last_transition_time) == ("True", OPENING.opens_at)
    assert step.status.phase == PHASE_PENDING and step.status.reason is None
    assert (
        deadlines.look_again_at(opened, step.status) == (OPENING.opens_at + timedelta(minutes=5)).timestamp()
    )
    # Redis lost the opening: the status still has it.
    recorded = replace(opened, job=with_status(opened.job, step.status), window=None)
    late = replace(recorded, now=OPENING.opens_at + timedelta(minutes=5, seconds=1))
    ended = progress(late)
    assert ended.status.phase == PHASE_FAILED and ended.status.reason == "Timeout"
    assert "counted from when disruption window nightly opened at 2026-11-22T18:00:00Z" in (
        ended.status.message or ""
    )
    assert progress(replace(late, now=late.now - timedelta(seconds=2))).status.phase == PHASE_PENDING


def test_a_job_admitted_in_its_window_runs_on_after_the_window_closes() -> None:
    admitted = seen(window=OPENING, now=OPENING.closes_at + timedelta(seconds=30))
    admitted = replace(admitted, job=job(ttl="3h"))
    step = progress(admitted)
    assert step.status.phase == PHASE_RUNNING and RESERVE in step.actions


def test_a_wait_whose_opening_redis_lost_does_not_time_out() -> None:
    waiting = replace(seen(admitted=False, window=OPENING), job=job(ttl="5m"))
    status = progress(waiting).status
    lost = replace(waiting, job=with_status(waiting.job, status), window=None, now=NOW + timedelta(hours=3))
    assert deadlines.ttl_start(lost, status) is None
    assert progress(lost).status.phase == PHASE_PENDING
