"""`podherd sim` as a developer runs it, on either engine: the scenario served, a kubeconfig written last
(its name says all is ready), Podherd's accounts installed with `--podherd-accounts`, and SIGTERM ending it
with 0."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from kubesim.sim import SimHandle
from tests.kube import client_for, pod_ready

pytestmark = pytest.mark.integration


def test_podherd_sim_serves_the_scenario_with_podherds_accounts_until_sigterm(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    engine = request.config.getoption("engine")
    kubeconfig, accounts = tmp_path / "kubeconfig", tmp_path / "accounts"
    argv = [sys.executable, "-m", "podherd", "sim", "--engine", engine, "--scenario", "small", "--port", "0"]
    argv += ["--kubeconfig", str(kubeconfig), "--podherd-accounts", str(accounts)]
    log = tmp_path / "sim.log"
    with log.open("wb") as out:
        sim = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 90
        while not kubeconfig.exists():  # nothing tells of a file but the file
            assert sim.poll() is None, log.read_text()
            assert time.monotonic() < deadline, f"no kubeconfig within 90 s: {log.read_text()[-2000:]}"
            time.sleep(0.1)
        kube = client_for(SimHandle(url="", kubeconfig=kubeconfig))
        assert len(kube.core.list_node().items) == 3
        pods = kube.core.list_namespaced_pod("default", label_selector="app=web").items
        assert len(pods) == 3 and all(pod_ready(p) for p in pods)
        watcher = kubernetes.config.new_client_from_config(config_file=str(accounts / "kubeconfig-watcher"))
        seen: Any = (
            kubernetes.client.CoreV1Api(watcher).list_pod_for_all_namespaces().items
        )  # its role allows
        assert len([p for p in seen if p.metadata.namespace == "default"]) == 3
        with pytest.raises(kubernetes.client.ApiException) as refused:  # and nothing beyond it
            kubernetes.client.CoreV1Api(watcher).delete_namespaced_pod(pods[0].metadata.name, "default")
        assert refused.value.status == 403
        watcher.close()
        kube.api.close()
    finally:
        sim.send_signal(signal.SIGTERM)
        code = sim.wait(60)
    assert code == 0, log.read_text()[-2000:]
