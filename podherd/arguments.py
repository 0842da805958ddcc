"""The CLI's arguments. Their types: a value that can never work is a usage error (exit 2), said in the
user's terms (which name is wrong and what it must look like, with an example; never a type name or a
regular expression). The configuration they name, with kubectl's `--kubeconfig` and `--context` over it.
What goes on after Ctrl-C."""

from __future__ import annotations

import argparse
import os
import re
import tempfile
from pathlib import Path

import msgspec

from shared.config.loader import load_config
from shared.config.model import PodherdConfig
from shared.core.durations import DURATION_PATTERN, parse_duration

_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DURATION_EXAMPLE = "such as 30s, 5m or 1h30m"


def pod_key(text: str) -> tuple[str, str]:
    """NAMESPACE/POD, each a valid Kubernetes name."""
    namespace, sep, name = text.partition("/")
    if not sep or not namespace or not name or "/" in name:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAMESPACE/POD (for example default/web-0)")
    return _namespace(namespace), _object_name(name, "a pod name")


CERT_PARTS = ("nats", "redis-server", "gate", "apiserver-client", "redis-passwords")


def cert_part(text: str) -> str:
    if text not in CERT_PARTS:
        raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(CERT_PARTS)}")
    return text


def whole_number(text: str, *, least: int, most: int | None = None, what: str = "a whole number") -> int:
    """`text` as a whole number from `least` (to `most`), or a usage error saying what it must be."""
    span = f"{least} to {most}" if most is not None else f"{least} or more"
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what} ({span})") from None
    if value < least or (most is not None and value > most):
        raise argparse.ArgumentTypeError(f"{text} is not {what} ({span})")
    return value


def port(text: str) -> int:
    return whole_number(text, least=0, most=65535, what="a port number")


def _path(text: str) -> Path:
    try:
        return Path(text).expanduser()
    except RuntimeError:  # `~user` of no such user
        raise argparse.ArgumentTypeError(f"{text!r}: no such user's home directory") from None


def writable_file(text: str) -> str:
    """A file to write (its directories made as needed): where files can be made, tried in the nearest
    directory that exists."""
    return _takes_files(text, _nearest(_path(text).absolute().parent, text))


def writable_dir(text: str) -> str:
    """A directory to keep files in (made as needed): where files can be made, tried in the nearest
    directory that exists."""
    return _takes_files(text, _nearest(_path(text).absolute(), text))


def _nearest(path: Path, text: str) -> Path:
    there = next((p for p in (path, *path.parents) if p.exists()), Path("/"))
    if not there.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r}: {there} is not a directory")
    return there


def _takes_files(text: str, directory: Path) -> str:
    """`text`, once a file could be made in `directory` (tried, and nothing left behind)."""
    try:
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: cannot write in {directory}: {exc.strerror}") from None
    return text


def readable_file(text: str) -> str:
    path = _path(text)
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{text!r}: there is no such file")
    if not os.access(path, os.R_OK):
        raise argparse.ArgumentTypeError(f"{text!r}: the file is not readable")
    return text


def node_name(text: str) -> str:
    return _object_name(text, "a node name")


def job_name(text: str) -> str:
    return _object_name(text, "a PodMigrationJob name")


def duration(text: str) -> str:
    """A Go duration, 0 or more (as Kubernetes writes them)."""
    if re.match(DURATION_PATTERN, text) is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration; use one {DURATION_EXAMPLE}")
    if parse_duration(text) < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is negative; use a duration {DURATION_EXAMPLE}")
    return text


def seconds(text: str) -> float:
    """A wait, more than 0: a duration as kubectl's `--timeout` takes it (30s, 5m), or a number of
    seconds."""
    try:
        value = float(text)
    except ValueError:
        try:
            value = parse_duration(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a duration; use one {DURATION_EXAMPLE} (or a number of seconds)"
            ) from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {text}")
    return value


def _namespace(text: str) -> str:
    if len(text) > 63 or _LABEL.match(text) is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a namespace: lowercase letters, digits and '-', at most 63 of them "
            "(for example default)"
        )
    return text


def _object_name(text: str, what: str) -> str:
    if len(text) > 253 or _SUBDOMAIN.match(text) is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not {what}: lowercase letters, digits, '-' and '.', starting and ending with a "
            "letter or digit"
        )
    return text


def loaded(args: argparse.Namespace) -> PodherdConfig:
    """The configuration, with `--kubeconfig` and `--context` over it (as kubectl's)."""
    config = load_config(args.config)
    chosen = {k: v for k, v in (("kubeconfig", args.kubeconfig), ("context", args.context)) if v}
    if not chosen:
        return config
    kubernetes = msgspec.structs.replace(config.kubernetes, **chosen, in_cluster=False)
    return msgspec.structs.replace(config, kubernetes=kubernetes)


def what_goes_on(command: str, args: dict[str, object]) -> str:
    """After Ctrl-C: what goes on without the CLI, and how to stop it."""
    if command == "drain" and not args.get("status") and not args.get("dry_run"):
        node = args.get("node")
        return (
            f"the drain goes on without this command: its jobs keep moving pods and node {node} stays "
            f"cordoned. `podherd drain {node} --status` shows it; to stop it, abort its jobs "
            f"(kubectl annotate pmj NAME podherd.io/abort=why) and `kubectl uncordon {node}`"
        )
    if command == "submit":
        return (
            "the job goes on without this command (`podherd jobs` shows it); to stop it, "
            "kubectl annotate pmj NAME podherd.io/abort=why"
        )
    return "nothing was left running"


def token_file(parser: argparse.ArgumentParser) -> None:
    """`--token-file`: the token a command's intents carry."""
    parser.add_argument(
        "--token-file",
        type=readable_file,
        help="the ServiceAccount token (audience podherd) the intents carry (default: intents.tokenFile)",
    )
