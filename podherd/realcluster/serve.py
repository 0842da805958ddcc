"""`podherd sim --engine real`: the real engine as a cluster of one's own until SIGTERM (or Ctrl-C)."""

from __future__ import annotations

import argparse
import shutil
import signal
import threading
from pathlib import Path
from typing import Any

from podherd.errors import CliError
from podherd.harness.processes import SERVICES
from podherd.install import install_with_accounts
from podherd.realcluster import build, engine
from podherd.realcluster.cluster import ControlPlaneFailed

UNSUPPORTED = ("evict_in_background", "run_podherd", "no_controllers", "advertise_url")


def serve_real(args: argparse.Namespace, document: dict[str, Any] | None, *, token_seconds: int) -> int:
    """`document`: the scenario, read already."""
    given = [f"--{name.replace('_', '-')}" for name in UNSUPPORTED if getattr(args, name, None)]
    given += ["--service"] if args.service else []
    if given:
        raise CliError(f"{', '.join(given)}: kubesim's alone, not the real engine's")
    if args.port not in (0, 6443):
        raise CliError("--port: the real engine's API server takes a free port of its own (use 0)")
    if args.podherd_accounts and not args.kubeconfig:
        raise CliError("--podherd-accounts needs --kubeconfig")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        timeout = f"--min-request-timeout={args.min_request_timeout:.0f}"
        handle = engine.start(document, apiserver_args=(timeout,))
    except build.ControlPlaneUnavailable as exc:
        print(str(exc), flush=True)
        return 2
    except (ControlPlaneFailed, TimeoutError) as exc:
        raise CliError(f"the real engine did not start: {exc}") from exc
    try:
        if args.kubeconfig:
            target = Path(args.kubeconfig)
            tmp = target.with_suffix(".tmp")
            shutil.copyfile(handle.kubeconfig, tmp)
            if args.podherd_accounts:
                install_with_accounts(tmp, Path(args.podherd_accounts), SERVICES, seconds=token_seconds)
            tmp.replace(target)  # its name says all is done
        print(
            f"real engine serving {handle.url} (ready in {handle.started_in:.1f} s)"
            + (f"; kubeconfig {args.kubeconfig}" if args.kubeconfig else ""),
            flush=True,
        )
        stop.wait()
    finally:
        handle.stop()
    return 0
