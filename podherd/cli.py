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


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", help="YAML config file (default: $PODHERD_CONFIG)")
    parser = argparse.ArgumentParser(prog="podherd", description="Safe pod migration for Kubernetes.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    sub.add_parser("version", help="print the version").set_defaults(func=_cmd_version)
    sub.add_parser(
        "config", parents=[common], help="print the effective configuration after file and environment"
    ).set_defaults(func=_cmd_config)
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
