"""`podherd run all`: the four services in one process, one ops endpoint whose readiness names each service's
checks, and `podherd plan --apply` defragmenting through it; SIGTERM ends it with exit 0."""

from __future__ import annotations

import json
import signal
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

from kubesim.sim import SimHandle
from podherd.harness.processes import ops_port
from podherd.harness.servers import Server, spawn_logged
from podherd.install import install
from shared.config.model import KubernetesConfig
from shared.kube.client import KubeClient
from tests.e2e.pipeline import GROUP, PLURAL, VERSION, ended, pipeline_config, podherd
from tests.kube import Kube, client_for, watch_until
from tests.polling import until_sync

pytestmark = [pytest.mark.e2e, pytest.mark.integration]


def all_ended(kube: Kube, count: int, within: float) -> dict[str, dict[str, Any]]:
    state = watch_until(
        kube.custom.list_cluster_custom_object,
        lambda st: len(st) >= count and all(ended(j) for j in st.values()),
        within,
        group=GROUP,
        version=VERSION,
        plural=PLURAL,
    )
    return {k.lstrip("/"): v for k, v in state.items()}


def ready(port: int) -> str | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as answer:
            return str(answer.read().decode())
    except OSError:
        return None


def test_run_all_serves_every_service_and_plan_apply_defragments(
    kubesim_factory: Callable[..., SimHandle],
    nats_srv: Server,
    redis_srv: Server,
    test_id: str,
    tmp_path: Path,
) -> None:
    handle = kubesim_factory("fragmented")
    kube = KubeClient.from_config(KubernetesConfig(kubeconfig=str(handle.kubeconfig)))
    install(kube, rbac=False)
    config = pipeline_config(handle, nats_srv, redis_srv, test_id)
    path = tmp_path / "podherd.yaml"
    document = msgspec.to_builtins(config)
    document["http"] = {"host": "127.0.0.1", "port": 0}  # it binds a free port and logs which
    path.write_text(yaml.safe_dump(document))

    dry = podherd(path, "plan", "-o", "json")
    assert dry.returncode == 0, dry.stderr
    plan = json.loads(dry.stdout)
    assert plan["pending"] == "default/big" and len(plan["moves"]) == 2

    log = tmp_path / "run-all.log"
    service = spawn_logged([sys.executable, "-m", "podherd", "run", "all", "--config", str(path)], log)
    try:

        def answered() -> tuple[int, str] | None:
            assert service.poll() is None, log.read_text()[-2000:]
            port = ops_port(log)
            answer = ready(port) if port else None
            return (port, answer) if answer is not None else None

        # The process starting up: nothing to await but its port.
        port, answer = until_sync(answered, within=60, what="run all answering on its port", every=0.1)
        assert answer == "ready\n"
        # One endpoint for the four: every service's metrics.
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            metrics = response.read().decode()
        for family in ("podherd_watcher_events", "podherd_arbitrator_decisions", "podherd_jobs"):
            assert family in metrics

        applied = podherd(path, "plan", "--apply")
        assert applied.returncode == 0, applied.stderr
        assert applied.stdout.count("-> job podherd-") == 2
        jobs = all_ended(client_for(handle), 2, within=60)
        assert all(j["status"]["phase"] == "Succeeded" for j in jobs.values()), [
            j["status"] for j in jobs.values()
        ]
        # The moved pods terminate after their grace; then the scheduler places big in the emptied node.
        placed = watch_until(
            client_for(handle).core.list_namespaced_pod,
            lambda st: bool(st["default/big"].spec.node_name),
            30,
            namespace="default",
            field_selector="metadata.name=big",
        )
        assert placed["default/big"].spec.node_name == plan["empty"]
        again = podherd(path, "plan")
        assert again.returncode == 1 and "no pod is pending" in again.stderr
        listed = podherd(path, "jobs", "-o", "json")
        assert {i["metadata"]["name"] for i in json.loads(listed.stdout)["items"]} == set(jobs)
    finally:
        service.send_signal(signal.SIGTERM)
        service.wait(timeout=60)
        kube.close()
    assert service.returncode == 0, log.read_text()[-2000:]
