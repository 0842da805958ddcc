"""`podherd sim` as a separate process, and scenarios from YAML files."""

from __future__ import annotations

import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from kubesim.sim import SimHandle, start_subprocess
from podherd.install import SERVICE_ACCOUNTS
from tests.kube import client_for

pytestmark = pytest.mark.integration

SCENARIO = """
name: two-zones
priorityClasses: [{name: high, value: 1000}]
nodes:
  - {name: "a-{i}", count: 2, capacity: {cpu: "2"}, labels: {zone: a}}
  - {name: "b-{i}", count: 1, capacity: {cpu: "8"}, labels: {zone: b},
     taints: [{key: dedicated, value: batch, effect: NoSchedule}]}
workloads:
  - {kind: StatefulSet, name: db, namespace: data, replicas: 2, requests: {cpu: "1"}, priorityClassName: high,
     pdb: {minAvailable: 1}}
pods:
  - {name: batch, namespace: data, requests: {cpu: "4"},
     tolerations: [{key: dedicated, operator: Equal, value: batch, effect: NoSchedule}]}
  - {name: nowhere, namespace: data, requests: {cpu: "4"}}
"""


def test_sim_subprocess_serves_a_scenario_file(tmp_path: Path) -> None:
    path = tmp_path / "scenario.yaml"
    path.write_text(SCENARIO)
    handle = start_subprocess(str(path))
    try:
        kube = client_for(handle)
        assert sorted(n.metadata.name for n in kube.core.list_node().items) == ["a-1", "a-2", "b-1"]
        pods = {p.metadata.name: p for p in kube.core.list_namespaced_pod("data").items}
        assert {pods["db-0"].spec.node_name, pods["db-1"].spec.node_name} <= {"a-1", "a-2"}
        assert pods["db-0"].spec.priority == 1000
        from tests.kube import watch_until

        state = watch_until(
            kube.core.list_namespaced_pod,
            lambda s: s["data/batch"].spec.node_name == "b-1" and bool(s["data/nowhere"].status.conditions),
            namespace="data",
        )
        message = state["data/nowhere"].status.conditions[0].message
        assert "Insufficient cpu" in message and "untolerated taint {dedicated: batch}" in message
    finally:
        handle.stop()
    assert handle.process is not None and handle.process.returncode == 0  # SIGTERM stops it cleanly


def test_generated_scenario(kubesim_factory: Callable[..., SimHandle]) -> None:
    kube = client_for(kubesim_factory("generate:20:300", scheduler=False))
    assert len(kube.core.list_node().items) == 20
    pods = kube.core.list_pod_for_all_namespaces().items
    assert len(pods) == 300 and all(p.status.phase == "Running" for p in pods)
    per_node: dict[str, int] = {}
    for pod in pods:
        per_node[pod.spec.node_name] = per_node.get(pod.spec.node_name, 0) + 1
    assert max(per_node.values()) - min(per_node.values()) <= 1  # spread evenly


@pytest.mark.parametrize("scenario", ["no-such-scenario", "generate:x:y"])
def test_sim_cli_rejects_bad_scenarios_in_one_line(scenario: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "podherd", "sim", "--scenario", scenario, "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1


def test_sim_installs_podherd_and_writes_each_service_its_own_kubeconfig(tmp_path: Path) -> None:
    accounts = tmp_path / "accounts"
    handle = start_subprocess(extra_args=["--podherd-accounts", str(accounts)])
    try:
        for service in SERVICE_ACCOUNTS:
            path = accounts / f"kubeconfig-{service}"  # written before the admin's kubeconfig appears
            review: Any = kubernetes.client.AuthenticationV1Api(
                kubernetes.config.new_client_from_config(str(path))
            )
            who = review.create_self_subject_review({"apiVersion": "authentication.k8s.io/v1"})
            assert who.status.user_info.username == f"system:serviceaccount:podherd:podherd-{service}"
            assert stat.S_IMODE(path.stat().st_mode) == 0o600  # it holds a token
    finally:
        handle.stop()
