"""The demo's services started on their cluster, and the demo itself made a sender of intents."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import yaml

from podherd.install import requester_file
from shared.config.loader import config_from_dict
from shared.config.model import PodherdConfig
from shared.core.redact import without_credentials
from shared.kube.client import KubeClient


def started(services: Any, stack: contextlib.ExitStack, workdir: Path) -> tuple[PodherdConfig, KubeClient]:
    """`services` (the demo's `_Services`) started; the configuration they run with, which carries the
    demo's own token for its intents, and an API client closed with `stack`."""
    token_file = workdir / "requester.token"
    services.config_document.setdefault("intents", {})["tokenFile"] = str(token_file)
    (workdir / "podherd.yaml").write_text(yaml.safe_dump(services.config_document))
    config = config_from_dict(services.config_document)
    kube = KubeClient.from_config(config.kubernetes)
    stack.callback(kube.close)
    services.start(kube)
    requester_file(kube, token_file, audience=config.intents.audience)
    return config, kube


@dataclass
class KeptUp:
    """What `--keep` holds up once a demo has told its story (its servers and services), and where it is."""

    stack: contextlib.ExitStack
    where: list[str]


def keep_up(keep: bool, stack: contextlib.ExitStack, services: Any, *, workdir: Path) -> KeptUp | None:
    """With `keep`, what `stack` would stop is taken from it, to be held up by `stay_up`."""
    if not keep:
        return None
    config = config_from_dict(services.config_document)
    where = [
        f"\n--keep: everything stays up. KUBECONFIG={services.kubeconfig} "
        f"NATS_URL={without_credentials(config.nats.url)} ",
        f"REDIS_URL={without_credentials(config.redis.url)} PODHERD_CONFIG={workdir / 'podherd.yaml'}; "
        "Ctrl-C stops it all.",
    ]
    return KeptUp(stack.pop_all(), where)


def stay_up(kept: KeptUp | None, out: TextIO) -> None:
    """Say where everything is, and hold it up until Ctrl-C (or SIGTERM); then stop it all."""
    if kept is None:
        return
    with kept.stack:
        for line in kept.where:
            print(line, file=out)
        out.flush()
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)
