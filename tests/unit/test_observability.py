"""The Grafana dashboard and the metrics the services export agree: every series a panel queries exists, and
every metric the issue asks for is on the dashboard."""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client import REGISTRY

import services.arbitrator.service
import services.executor.service
import services.tracker.intake.intents
import services.tracker.service
import services.watcher.service
import shared.nats.consume

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "podherd.json"
SERIES = re.compile(r"\bpodherd_[a-z_]+")
SUFFIXES = ("_bucket", "_count", "_sum", "_total", "_created")
REQUIRED = {
    "podherd_jobs",  # jobs by phase
    "podherd_arbitrator_decisions",  # decisions by rule
    "podherd_arbitrator_admission_seconds",  # admission latency
    "podherd_evictions",  # evictions by policy and outcome
    "podherd_pod_evacuations",  # KEP-1397
    "podherd_pod_evacuations_in_progress",  # KEP-1397
    "podherd_ledger_slots_in_use",  # by limit
    "podherd_watcher_lag_seconds",  # watcher lag
}
MODULES = (
    services.arbitrator.service,
    services.executor.service,
    services.tracker.intake.intents,
    services.tracker.service,
)
_ = (MODULES, services.watcher.service, shared.nats.consume)  # imported for their metrics


def exported() -> set[str]:
    return {family.name for family in REGISTRY.collect()}


def base(series: str) -> str:
    for suffix in SUFFIXES:
        if series.endswith(suffix):
            return series[: -len(suffix)]
    return series


def queried() -> set[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    return {base(s) for expr in exprs for s in SERIES.findall(expr)}


def test_every_series_on_the_dashboard_is_exported() -> None:
    missing = queried() - exported()
    assert not missing, missing


def test_every_required_metric_is_exported_and_on_the_dashboard() -> None:
    assert exported() >= REQUIRED
    assert queried() >= REQUIRED


def test_panels_do_not_overlap() -> None:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    cells = [(p["gridPos"]["x"], p["gridPos"]["y"]) for p in panels]
    assert len(cells) == len(set(cells))
