"""The services by name: what `podherd run` starts. Each service's main, and what runs it, is imported only
when it runs: one service's process loads no other's code, and a command that only names them starts fast."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from shared.config.model import PodherdConfig
    from shared.service.runtime import ServiceMain

PIPELINE = ("watcher", "arbitrator", "executor", "tracker")  # what `run all` runs together
GATE = "gate"  # the admission gate: a process of its own, behind the API server's webhooks
PLANNER = "planner"  # the rebalancing policies on an interval: a process of its own, off by default
# Each service's entry module; its `main(config, stop, ops)` runs under shared.service.runtime.
MAINS = {name: f"services.{name}.service" for name in (*PIPELINE, PLANNER)} | {GATE: "services.gate.server"}


def main_of(name: str) -> ServiceMain:
    main: ServiceMain = importlib.import_module(MAINS[name]).main
    return main


def run(name: str, config: PodherdConfig) -> int:
    """One service, or with `all` the pipeline's four in one process, until SIGTERM; the exit code."""
    from shared.service.runtime import run as run_one
    from shared.service.runtime import run_together

    if name == "all":
        return run_together(config, {s: main_of(s) for s in PIPELINE})
    return run_one(name, config, main_of(name))
