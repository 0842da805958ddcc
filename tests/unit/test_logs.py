"""Structured logs: one JSON object per line, with the job every line about a job is for."""

from __future__ import annotations

import json
import logging

from shared.service.logs import JsonFormatter, about_job


def line(record: logging.LogRecord) -> dict[str, object]:
    formatted: dict[str, object] = json.loads(JsonFormatter("tracker", "r0").format(record))
    return formatted


def record(msg: str, **extra: object) -> logging.LogRecord:
    made = logging.makeLogRecord({"name": "t", "levelno": logging.INFO, "levelname": "INFO", "msg": msg})
    made.__dict__.update(extra)
    return made


def test_a_line_is_json_with_service_replica_and_bound_fields() -> None:
    entry = line(record("evicting %s", phase="Running"))
    assert entry["service"] == "tracker" and entry["replica"] == "r0" and entry["level"] == "info"
    assert entry["phase"] == "Running" and "job" not in entry


def test_every_line_logged_while_handling_a_job_names_it() -> None:
    with about_job("podherd-abc"):
        inner = line(record("reading the pod"))  # e.g. from shared code that knows nothing of jobs
        with about_job("podherd-other"):
            nested = line(record("x"))
    after = line(record("idle"))
    assert inner["job"] == "podherd-abc" and nested["job"] == "podherd-other" and "job" not in after


def test_an_explicit_job_wins_over_the_context() -> None:
    with about_job("podherd-abc"):
        assert line(record("m", job="podherd-explicit"))["job"] == "podherd-explicit"


def test_exceptions_are_one_field_not_many_lines() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        made = record("failed")
        made.exc_info = sys.exc_info()
    text = JsonFormatter("executor", "r1").format(made)
    assert "\n" not in text and "ValueError: boom" in json.loads(text)["error"]
