"""How a process proves itself to NATS: TLS (the server's certificate checked against `nats.tls.ca`; a
client certificate, which the server may map to a user), and `nats.credentials` (an nkey seed, or a
`.creds` file holding a user JWT and its seed). Secrets come from files, never from the configuration.

A permission the server refuses (`Permissions Violation for Publish to "…"`) is a configuration mistake no
retry mends: the process is told once (`on_denied`), naming the subject, and a service stops on it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from shared.access.tls_files import TlsFiles
from shared.config.model import ConfigError, NatsConfig

log = logging.getLogger(__name__)
JWT_MARK = "BEGIN NATS USER JWT"


class Denials:
    """What the NATS server refused this process, and whom to tell (a service's runtime stops it)."""

    def __init__(self) -> None:
        self.first: str | None = None
        self.handler: Callable[[str], None] | None = None

    def seen(self, error: str) -> bool:
        """Record `error` if it is a permissions violation; True when it is one."""
        if "permissions violation" not in error.lower():
            return False
        if self.first is None:
            self.first = error
            log.error("NATS refused this service's user a permission it needs: %s", error)
            if self.handler is not None:
                self.handler(error)
        return True


DENIED = Denials()


class Access:
    """The connect options of one configuration, and its TLS files to reload before a reconnection."""

    def __init__(self, config: NatsConfig) -> None:
        self.options: dict[str, Any] = {}
        self.tls: TlsFiles | None = None
        if config.credentials:
            try:
                text = Path(config.credentials).read_text()
            except OSError as exc:
                raise ConfigError(
                    "nats.credentials", f"cannot read {config.credentials}: {exc.strerror}"
                ) from exc
            key = "user_credentials" if JWT_MARK in text else "nkeys_seed"
            self.options[key] = config.credentials  # a path: nats-py reads it again at each connection
        if config.tls is not None:
            try:
                self.tls = TlsFiles(config.tls)
            except (OSError, ValueError) as exc:
                raise ConfigError("nats.tls", f"cannot load the TLS files: {exc}") from exc
            self.options["tls"] = self.tls.context
            if config.tls.server_name:
                self.options["tls_hostname"] = config.tls.server_name

    def refresh(self) -> None:
        if self.tls is not None:
            self.tls.refresh()
