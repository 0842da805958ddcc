"""The API server's error answers: a Status read into a KubeError, its causes' messages and reasons kept."""

from __future__ import annotations

import msgspec


class KubeError(Exception):
    """A non-2xx answer from the API server, with its Status reason and message."""

    def __init__(self, status: int, reason: str, message: str, *, causes: tuple[str, ...] = ()) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.causes = causes  # the reasons of the Status's causes, e.g. "DisruptionBudget"

    @property
    def gone(self) -> bool:
        return self.status == 410

    @property
    def retryable(self) -> bool:
        return self.status == 429 or self.status >= 500


class _Cause(msgspec.Struct):
    reason: str = ""
    message: str = ""


class _Details(msgspec.Struct):
    causes: list[_Cause] = msgspec.field(default_factory=list)


class _Status(msgspec.Struct):
    reason: str = ""
    message: str = ""
    code: int = 0
    details: _Details | None = None


def error_from(status: int, body: bytes) -> KubeError:
    """The Status an API server answered, as a KubeError; the causes' messages follow the message (an
    eviction's 429 names the PodDisruptionBudget only there)."""
    try:
        decoded = msgspec.json.decode(body, type=_Status)
        causes = decoded.details.causes if decoded.details else []
        messages = [c.message for c in causes if c.message]
        reasons = tuple(c.reason for c in causes if c.reason)
        return KubeError(status, decoded.reason, "; ".join([decoded.message, *messages]), causes=reasons)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return KubeError(status, "", body[:200].decode(errors="replace"))
