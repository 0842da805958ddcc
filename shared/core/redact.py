"""Secrets kept out of what Podherd prints: URLs' credentials, and the configuration as `podherd config`
shows it (pure).

A password may be given inside a URL (`redis://user:password@host`), as the standard `REDIS_URL` allows;
whatever shows the URL to a person (an error, a log line, `podherd config`) shows it without them.
"""

from __future__ import annotations

import re
from typing import Any

_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^@/\s]*)@")
MASK = "***"
_TOKEN_SCHEMES = ("nats://", "tls://", "ws://", "wss://")


def without_credentials(text: str) -> str:
    """`text` with every URL's `user:password@` removed (for errors and logs)."""
    return _USERINFO.sub(lambda m: m.group("scheme"), text)


def masked(url: str) -> str:
    """A URL whose password is shown as `***`, its user kept (for a configuration a person reads)."""

    def mask(m: re.Match[str]) -> str:
        scheme = m.group("scheme")
        user, colon, _ = m.group("userinfo").partition(":")
        if not colon and scheme.lower() in _TOKEN_SCHEMES:  # nats://TOKEN@host: the lone part is a secret
            return f"{scheme}{MASK}@"
        return f"{scheme}{user}{':' + MASK if colon else ''}@"

    return _USERINFO.sub(mask, url)


def redacted(document: Any) -> Any:
    """A configuration document (plain data) with every URL's password masked."""
    if isinstance(document, dict):
        return {k: redacted(v) for k, v in document.items()}
    if isinstance(document, list):
        return [redacted(v) for v in document]
    if isinstance(document, str):
        return masked(document)
    return document
