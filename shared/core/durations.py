"""Go `time.Duration` strings, as Kubernetes' `metav1.Duration` writes them ("5m", "1h30m", "500ms").

The seeds give every time setting in this form (`defaultJobTTL: 5m`, `arbitrationArgs.interval: 500ms`),
and a PMJ's `spec.ttl` is one, so the same parser serves configuration and API objects.
"""

from __future__ import annotations

import functools
import re

# One or more <number><unit> groups, optionally signed; "0" alone is also valid (Go accepts it).
DURATION_PATTERN = r"^(0|[-+]?([0-9]*(\.[0-9]*)?(ns|us|µs|ms|s|m|h))+)$"

_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_GROUP = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|ms|s|m|h)")
_WHOLE = re.compile(DURATION_PATTERN)


@functools.lru_cache(
    maxsize=512
)  # the same few settings, read on hot paths (a job's ttl, a limiter's window)
def parse_duration(text: str) -> float:
    """Return the duration in seconds; raise ValueError naming the text when it is not a Go duration."""
    if not isinstance(text, str) or not _WHOLE.match(text):
        raise ValueError(f"invalid duration {text!r}: expected a Go duration such as '5m', '30s' or '1h30m'")
    if text == "0":
        return 0.0
    sign = -1.0 if text.startswith("-") else 1.0
    body = text.lstrip("+-")
    total = 0.0
    for number, unit in _GROUP.findall(body):
        if number in ("", "."):
            raise ValueError(f"invalid duration {text!r}: a unit without a number")
        total += float(number) * _UNIT_SECONDS[unit]
    return sign * total


def format_duration(seconds: float) -> str:
    """Format seconds the way Go's Duration.String() does for whole units ("5m0s", "1h0m0s", "500ms")."""
    if seconds == 0:
        return "0s"
    sign = "-" if seconds < 0 else ""
    seconds = abs(seconds)
    if seconds < 1:
        millis = seconds * 1000
        if millis >= 1:
            return f"{sign}{_trim(millis)}ms"
        return f"{sign}{_trim(seconds * 1e6)}µs"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    out = sign
    if hours:
        out += f"{int(hours)}h"
    if hours or minutes:
        out += f"{int(minutes)}m"
    return out + f"{_trim(secs)}s"


def _trim(value: float) -> str:
    text = f"{value:.9f}".rstrip("0").rstrip(".")
    return text or "0"
