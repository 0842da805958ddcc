"""TLS material from files, as Secrets mount it, for clients of NATS and Redis.

A certificate is renewed in place (cert-manager rewrites the Secret; the kubelet swaps the mounted files):
the context is loaded again when a file changed, before the next connection is made, so a renewal needs
no restart. Connections already open keep the certificate they were made with, as TLS has it.
"""

from __future__ import annotations

import logging
import ssl
from pathlib import Path

from shared.config.model import Tls

log = logging.getLogger(__name__)


class TlsFiles:
    def __init__(self, tls: Tls) -> None:
        self.tls = tls
        self._seen: tuple[float, ...] = ()
        self.context = self._load()

    def _stamps(self) -> tuple[float, ...]:
        return tuple(
            Path(f).stat().st_mtime if f else 0.0 for f in (self.tls.ca, self.tls.cert, self.tls.key)
        )

    def _load(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=self.tls.ca)
        if self.tls.cert:
            context.load_cert_chain(self.tls.cert, self.tls.key)
        self._seen = self._stamps()
        return context

    def refresh(self) -> None:
        """Load the files again into the same context if any changed (a renewal); a half-written renewal
        is tried again at the next refresh, the old material kept meanwhile."""
        try:
            if self._stamps() == self._seen:
                return
            if self.tls.cert:
                self.context.load_cert_chain(self.tls.cert, self.tls.key)
            if self.tls.ca:
                self.context.load_verify_locations(cafile=self.tls.ca)  # the new CA beside the old
            self._seen = self._stamps()
            log.info("TLS files reloaded", extra={"cert": self.tls.cert, "ca": self.tls.ca})
        except (OSError, ssl.SSLError) as exc:
            log.warning("TLS files not reloaded: %s", exc)
