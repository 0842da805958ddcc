"""The cluster a demo runs on: kubesim (the embedded default) or the real engine (`--engine real`), and how
each tells who made which requests."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from kubesim.options import SimOptions
from kubesim.sim import SimHandle, start_in_thread
from podherd.errors import CliError
from podherd.realcluster import build, engine
from podherd.realcluster.audit import AuditTrail
from podherd.realcluster.cluster import ControlPlaneFailed

ENGINES = ("kubesim", "real")


class AccessRecord(Protocol):
    """Who made which requests and what RBAC refused: kubesim's authorizer, or the real engine's audit log."""

    @property
    def denials(self) -> Sequence[object]: ...

    @property
    def used(self) -> set[tuple[str, str, str, str]]: ...


def start_cluster(which: str, scenario: str | dict[str, Any], options: SimOptions | None = None) -> SimHandle:
    if which == "kubesim":
        return start_in_thread(options or SimOptions(), scenario=scenario)
    try:
        return engine.start(scenario)
    except build.ControlPlaneUnavailable as exc:
        raise CliError(f"--engine real: {exc}") from exc
    except (ControlPlaneFailed, TimeoutError) as exc:
        raise CliError(f"--engine real: the control plane did not start: {exc}") from exc


def kubectl_for(which: str) -> str:
    """The kubectl that meets this engine: the one `make controlplane` built (v1.35) for the real one, whose
    version skew a machine's own may be outside; the machine's for kubesim."""
    if which == "real":
        try:
            return str(build.built() / "bin" / "kubectl")
        except build.ControlPlaneUnavailable as exc:
            raise CliError(f"--engine real: {exc}") from exc
    binary = shutil.which("kubectl")
    if binary is None:
        raise CliError("this scenario drains with kubectl itself: put kubectl on PATH, or use --engine real")
    return binary


def access_record(handle: SimHandle) -> AccessRecord:
    if handle.sim is not None:
        return handle.sim.authorizer
    return AuditTrail(Path(handle.kubeconfig).parent / "audit.log")
