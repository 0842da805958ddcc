"""Disruption windows through the four services, with a window relative to real time: a job its window
gates waits (its status and `podherd jobs` say until when; its ttl does not run), moves when the window
opens and finishes after it closes; a job no window gates moves at once; a job after the close waits for
the next opening."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kubesim.sim import SimHandle
from podherd.client import job_rows
from podherd.harness.servers import Server
from tests.e2e.pipeline import conditions, create_job, ended, pipeline, pipeline_config, until_job
from tests.e2e.test_lifecycle import cluster, start, web_pods

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

# The window stays open this long; the web replacement is Ready only after it closes.
OPEN_FOR = 4
READY_AFTER = OPEN_FOR + 3


def soon(now: datetime, at_least: float = 10.0) -> datetime:
    """The first whole second at least `at_least` seconds away (a six-field schedule names seconds): time
    for the job the window does not gate to move before it opens."""
    return now.replace(microsecond=0) + timedelta(seconds=math.ceil(at_least) + 1)


def waiting_for_window(job: dict[str, Any]) -> bool:
    return (job.get("status") or {}).get("reason") == "WaitForDisruptionWindow"


def stamp(moment: datetime) -> str:
    return f"{moment:%Y-%m-%dT%H:%M:%SZ}"


async def test_a_window_gates_its_jobs_until_it_opens_and_running_ones_finish_after_it_closes(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    scenario = cluster(web=2, readinessProbe={"tcpSocket": {"port": 80}, "initialDelaySeconds": READY_AFTER})
    db = {**scenario["workloads"][0], "name": "db", "replicas": 2, "readinessProbe": None}
    scenario["workloads"].append({k: v for k, v in db.items() if v is not None})
    kube = start(kubesim_factory, scenario)
    opens = soon(datetime.now(UTC))
    closes = opens + timedelta(seconds=OPEN_FOR)
    window = {
        "name": "e2e",
        "schedule": f"{opens.second} {opens.minute} {opens.hour} * * *",
        "duration": f"{OPEN_FOR}s",
        "labelSelector": {"matchLabels": {"app": "web"}},
    }
    config = pipeline_config(kube.handle, nats_srv, redis_srv, test_id, disruptionWindows=[window])
    web, late = sorted(web_pods(kube))
    db_pod = kube.core.list_namespaced_pod("default", label_selector="app=db").items[0].metadata.name
    async with pipeline(config):
        # A ttl far shorter than the wait: it counts from the opening.
        create_job(kube, "win-web", web, ttl="15s")
        create_job(kube, "win-db", db_pod)
        waiting = await until_job(kube, "win-web", waiting_for_window)
        assert f"it opens at {stamp(opens)} (until {stamp(closes)})" in waiting["status"]["message"]
        assert conditions(waiting)["DisruptionWindow"][0] == "False"
        (row,) = job_rows([waiting], datetime.now(UTC))
        assert row[2].startswith(f"WaitForDisruptionWindow (opens {stamp(opens)}, in ")
        # No window gates the db pod: it moves while the web job waits.
        moved = await until_job(kube, "win-db", ended)
        assert moved["status"]["phase"] == "Succeeded", moved["status"]
        assert datetime.now(UTC) < opens
        budget = (opens - datetime.now(UTC)).total_seconds() + READY_AFTER + 30
        done = await until_job(kube, "win-web", ended, within=budget)
        finished = datetime.now(UTC)
        create_job(kube, "win-late", late)
        later = await until_job(kube, "win-late", waiting_for_window)
    status = done["status"]
    assert status["phase"] == "Succeeded", status
    mark = next(c for c in status["conditions"] if c["type"] == "DisruptionWindow")
    assert (mark["status"], mark["lastTransitionTime"]) == ("True", stamp(opens))
    # It was admitted in the window, and finished after the window closed.
    assert finished > closes
    assert f"it opens at {stamp(opens + timedelta(days=1))}" in later["status"]["message"]
