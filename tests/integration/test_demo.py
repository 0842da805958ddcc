"""`podherd demo` (what `make demo` runs) works end to end on the embedded default and exits 0."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration


def test_demo_runs_and_reports_what_happened() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("NATS_URL", "REDIS_URL", "KUBECONFIG")}
    result = subprocess.run(
        [sys.executable, "-m", "podherd", "demo"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    summary = json.loads(result.stdout[result.stdout.index("{") :])
    cluster = summary["cluster"]
    assert cluster["deleted_pod_events"] == ["ADDED", "MODIFIED", "DELETED"]
    assert cluster["replacement_pod"] and cluster["replacement_pod"].startswith("web-")
    assert cluster["big_pod"]["phase"] == "Pending"
    assert {"Pod", "Node", "Deployment", "ReplicaSet", "PodDisruptionBudget"} <= set(
        cluster["events_by_kind"]
    )
    assert summary["ledger_and_intents"]["intent_stored"] == 1
    assert summary["ledger_and_intents"]["slots_held"] == 1
