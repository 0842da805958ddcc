"""The real engine as one call: built (make controlplane), started, the scenario made, a handle returned
whose kubeconfig is the administrator's, as kubesim's `start_in_thread` returns one."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from kubesim.scenario import resolve
from kubesim.sim import SimHandle
from podherd.realcluster import build, scenario
from podherd.realcluster.cluster import ControlPlane
from shared.config.model import KubernetesConfig
from shared.kube.client import KubeClient


def start(
    scenario_doc: str | dict[str, Any] | None = None,
    work: Path | None = None,
    *,
    apiserver_args: tuple[str, ...] = (),
) -> SimHandle:
    plane = ControlPlane(build.built(), work, apiserver_args=apiserver_args)
    handle = plane.start()
    try:
        if scenario_doc is not None:
            load(handle, resolve(scenario_doc))
    except BaseException:
        handle.stop()
        raise
    return handle


def load(handle: SimHandle, document: dict[str, Any]) -> float:
    """Make `document` on the cluster behind `handle`; the seconds it took."""
    began = time.monotonic()
    admin = KubeClient.from_config(KubernetesConfig(kubeconfig=str(handle.kubeconfig)))
    pods = sum(int(w.get("replicas", 1)) for w in document.get("workloads") or [])
    try:
        scenario.load(admin, document, timeout=120.0 + 0.2 * pods)  # kwok starts some 50 pods a second
    finally:
        admin.close()
    return time.monotonic() - began
