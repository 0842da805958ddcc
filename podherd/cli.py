"""`podherd`: one command for operators. Every error is one line on stderr and a non-zero exit."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence

import msgspec

from podherd import __version__
from shared.config import ConfigError, load_config
from shared.servers import ServerUnavailable

EXIT_USAGE = 2
EXIT_FAILED = 1


class CliError(Exception):
    """An expected failure: printed as one line, exit code 1."""


def _cmd_version(_: argparse.Namespace) -> int:
    print(f"podherd {__version__}")
    return 0


def _cmd_config(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    print(json.dumps(msgspec.to_builtins(config), indent=2, sort_keys=True))
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from podherd.demo import run_demo

    return run_demo(keep=args.keep)


def _cmd_sim(args: argparse.Namespace) -> int:
    import asyncio
    from pathlib import Path

    import yaml

    from kubesim.options import SimOptions
    from kubesim.scenario import resolve
    from kubesim.sim import serve_forever

    scenario = None
    if args.scenario:
        try:
            scenario = resolve(args.scenario)
        except (KeyError, ValueError, OSError, yaml.YAMLError) as exc:
            raise CliError(f"scenario {args.scenario!r}: {exc}") from exc
    options = SimOptions(evict_in_background=args.evict_in_background, record_events=not args.no_events)
    if args.no_controllers:
        options.scheduler = options.workloads = options.kubelet = options.pdb = False
    kubeconfig = Path(args.kubeconfig) if args.kubeconfig else None
    try:
        asyncio.run(serve_forever(options, scenario, args.port, kubeconfig, host=args.host))
    except OSError as exc:
        raise CliError(f"cannot serve on {args.host}:{args.port}: {exc.strerror}") from exc
    return 0


SERVICES = ("watcher", "arbitrator", "executor", "tracker")


def _cmd_run(args: argparse.Namespace) -> int:
    from shared.runtime import run

    config = load_config(args.config)
    if args.service == "watcher":
        from services.watcher.service import main as watcher_main

        return run("watcher", config, watcher_main)
    if args.service == "arbitrator":
        from services.arbitrator.service import main as arbitrator_main

        return run("arbitrator", config, arbitrator_main)
    if args.service == "executor":
        from services.executor.service import main as executor_main

        return run("executor", config, executor_main)
    from services.tracker.service import main as tracker_main

    return run("tracker", config, tracker_main)


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", help="YAML config file (default: $PODHERD_CONFIG)")
    parser = argparse.ArgumentParser(prog="podherd", description="Safe pod migration for Kubernetes.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    sub.add_parser("version", help="print the version").set_defaults(func=_cmd_version)
    sub.add_parser(
        "config", parents=[common], help="print the effective configuration after file and environment"
    ).set_defaults(func=_cmd_config)
    run = sub.add_parser("run", parents=[common], help="run a service (production entry point)")
    run.add_argument("service", choices=SERVICES)
    run.set_defaults(func=_cmd_run)
    sim = sub.add_parser("sim", help="run kubesim, a Kubernetes API server with simulated control loops")
    sim.add_argument("--scenario", help="fragmented, small, generate:NODES:PODS, or a YAML file")
    sim.add_argument("--port", type=int, default=6443, help="port to serve on (0: any free port)")
    sim.add_argument("--host", default="127.0.0.1")
    sim.add_argument("--kubeconfig", help="write a kubeconfig for the simulator here")
    sim.add_argument(
        "--evict-in-background",
        action="store_true",
        help="answer request-evict-only pods' evictions with 429 'Eviction triggered' (seed 003)",
    )
    sim.add_argument("--no-events", action="store_true", help="do not record Kubernetes Events")
    sim.add_argument(
        "--no-controllers",
        action="store_true",
        help="a static cluster: no scheduler, workload controllers, kubelet or PDB controller",
    )
    sim.set_defaults(func=_cmd_sim)
    demo = sub.add_parser("demo", parents=[common], help="run the demo on the embedded default")
    demo.add_argument(
        "--keep", action="store_true", help="leave the servers running and print their addresses"
    )
    demo.set_defaults(func=_cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except (CliError, ConfigError, ServerUnavailable) as exc:
        print(f"podherd: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        return 130
