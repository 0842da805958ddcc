"""The arbitrator's own Redis keys (`<keyPrefix>:arbitrator:…`), spelled here only; the queue, gates and
slots are the ledger's (shared.ledger.store), the facts the fact store's."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ArbitratorKeys:
    key_prefix: str

    @property
    def base(self) -> str:
        return f"{self.key_prefix}:arbitrator"

    @property
    def jobs(self) -> str:
        """Hash: job uid -> the queued PMJ (encoded), as its latest event showed it."""
        return f"{self.base}:jobs"

    @property
    def since(self) -> str:
        """Hash: job uid -> when it entered the queue (epoch seconds), for the admission latency."""
        return f"{self.base}:since"

    @property
    def pod_jobs(self) -> str:
        """Hash: `namespace/name` of a pod -> the uid of the queued job for it (its facts re-rank it)."""
        return f"{self.base}:pod-jobs"

    @property
    def decided(self) -> str:
        """Hash: job uid -> 1 once its outcome was told: replayed events do not queue it again."""
        return f"{self.base}:decided"

    @property
    def deferred(self) -> str:
        """Hash: job uid -> the message of its last audited deferral."""
        return f"{self.base}:deferred"

    @property
    def windows(self) -> str:
        """String: a digest of the disruption windows the jobs waiting for one were parked by."""
        return f"{self.base}:windows"
