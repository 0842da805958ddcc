"""The demo's services started on their cluster, and the demo itself made a sender of intents."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import yaml

from podherd.install import requester_file
from shared.config import PodherdConfig
from shared.config_loader import config_from_dict
from shared.kube import KubeClient


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
