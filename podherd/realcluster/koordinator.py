"""Koordinator's own migration controller beside the real engine: koord-descheduler v1.8.0 (built from the
same module as koord-scheduler) running its MigrationController alone, as Koordinator ships it but for what
a test rig changes: no leader election, no serving port, the administrator's kubeconfig, and the scenario's
MigrationControllerArgs over Koordinator's defaults."""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kubesim.sim import SimHandle
from podherd.harness.servers import free_port, spawn_logged
from podherd.realcluster import build

API_VERSION = "descheduler/v1alpha2"
READY_WITHIN = 30.0


def descheduler_config(kubeconfig: Path, args: dict[str, Any], *, port: int) -> dict[str, Any]:
    """A DeschedulerConfiguration running MigrationController alone with `args` (Koordinator's defaults
    for what they leave out), its health and metrics on loopback at `port`."""
    everything_off = {"disabled": [{"name": "*"}]}
    plugins = {
        "deschedule": everything_off,
        "balance": everything_off,
        "evict": {**everything_off, "enabled": [{"name": "MigrationController"}]},
    }
    migration = {"apiVersion": API_VERSION, "kind": "MigrationControllerArgs", **args}
    return {
        "apiVersion": API_VERSION,
        "kind": "DeschedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "healthzBindAddress": f"127.0.0.1:{port}",
        "metricsBindAddress": f"127.0.0.1:{port}",
        "deschedulingInterval": "10s",
        "profiles": [
            {
                "name": "koord-descheduler",
                "plugins": plugins,
                "pluginConfig": [{"name": "MigrationController", "args": migration}],
            }
        ],
    }


def argv(binary: Path, config: Path) -> list[str]:
    return [str(binary), "--config", str(config), "--secure-port", "0", "--v", "2"]


@dataclass
class KoordinatorController:
    """koord-descheduler's MigrationController on the engine behind `handle`."""

    handle: SimHandle
    work: Path
    args: dict[str, Any] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None

    @property
    def log(self) -> Path:
        return self.work / "koord-descheduler.log"

    def start(self) -> KoordinatorController:
        self.work.mkdir(parents=True, exist_ok=True)
        config = self.work / "koord-descheduler.yaml"
        document = descheduler_config(Path(self.handle.kubeconfig), self.args, port=free_port())
        config.write_text(yaml.safe_dump(document))
        binary = build.built() / "bin" / "koord-descheduler"
        self.process = spawn_logged(argv(binary, config), self.log)
        self._until_running()
        return self

    def _until_running(self) -> None:
        """Its MigrationController's workers started (its informers synced first), as its log says."""
        deadline = time.monotonic() + READY_WITHIN
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                tail = self.log.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"koord-descheduler exited with {self.process.returncode}:\n{tail}")
            text = self.log.read_text(errors="replace") if self.log.exists() else ""
            if '"Starting workers" "controller"="MigrationController"' in text:
                return
            time.sleep(0.1)  # a process starting: nothing to await but its log
        raise TimeoutError(f"koord-descheduler did not start within {READY_WITHIN:.0f}s (see {self.log})")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
