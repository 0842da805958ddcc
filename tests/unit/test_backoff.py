"""Waiting for a dependency (shared.core.backoff): waits that double from the first up to the cap, each drawn
from the upper half of its step, one line per attempt; loops that try the same dependency at once share
its steps and its lines."""

from __future__ import annotations

import logging
import random

import pytest

from shared.core.backoff import Backoff, SharedBackoff, delay


def test_waits_double_up_to_the_cap_within_the_upper_half_of_each_step() -> None:
    rng = random.Random(7)
    for failures, ceiling in [(1, 0.5), (2, 1.0), (3, 2.0), (6, 16.0), (7, 30.0), (40, 30.0)]:
        waits = [delay(failures, first=0.5, cap=30.0, rng=rng) for _ in range(50)]
        assert all(ceiling / 2 <= w <= ceiling for w in waits), (failures, min(waits), max(waits))


def test_each_attempt_is_one_line_naming_the_dependency_without_credentials(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "podherd.dependencies")
    down = Backoff("Redis", "redis://app:s3cret@redis:6379/0")
    for _ in range(3):
        down.failed(ConnectionRefusedError(111, "Connection refused"))
    down.answered()
    down.answered()  # answered again: nothing more to say
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 4, lines
    assert all("s3cret" not in line for line in lines)
    assert lines[0].startswith("Redis unreachable at redis://redis:6379/0: [Errno 111] Connection refused")
    assert "attempt 3" in lines[2] and lines[3].endswith("answers again after 3 failed attempts")


def test_loops_failing_in_one_step_cost_one_line_and_wait_for_its_end(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, "podherd.dependencies")
    api = SharedBackoff("the Kubernetes API server", "https://10.0.0.1:6443", first=1.0, cap=8.0)
    first = api.failed("pods: refused")
    others = [api.failed(f"{kind}: refused") for kind in ("nodes", "reservations", "deployments")]
    assert len(caplog.records) == 1  # ten kinds, one dependency: one line
    assert all(0 < wait <= first for wait in others)  # they try again with the first, not before
    api.answered()
    api.failed("pods: refused")  # a new outage starts its own step at once
    assert len(caplog.records) == 2
