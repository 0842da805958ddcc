"""Disruption windows (`migrationController.disruptionWindows`): which apply to a pod, whether one of them is
open at a given time, and when the next one opens. Pure: the time is an argument (cron from `cronsim`, zones
from `zoneinfo`, backed by `tzdata` where the OS has none).

A window opens at every time its cron schedule names (five fields as a CronJob's, or six with seconds
first, for windows opened at a given second), read in its zone (so "0 2 * * *" in Europe/Berlin
follows daylight saving time; a time a DST change skips fires at the first instant after it, a time it repeats
fires once), and stays open for its duration.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import msgspec
from cronsim import CronSim, CronSimError

from shared.api.messages import WindowOpening as Opening
from shared.api.selectors import matches_label_selector
from shared.config.model import DisruptionWindow
from shared.core.durations import parse_duration

# robfig/cron's (and so a Kubernetes CronJob's) shorthands, as five fields.
CRON_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_TINY = timedelta(microseconds=1)
# A schedule is valid when it fires at all: tried from a fixed instant (this module reads no clock).
_CHECKED_FROM = datetime(2000, 1, 1)


class Open(msgspec.Struct, frozen=True):
    """A window applying to the pod is open now (the one that stays open longest)."""

    opening: Opening


class Closed(msgspec.Struct, frozen=True):
    """Windows apply to the pod and none is open: `opening` is the next one."""

    opening: Opening


def expression(window: DisruptionWindow) -> str:
    return CRON_MACROS.get(window.schedule.strip(), window.schedule)


def check(window: DisruptionWindow) -> tuple[str, str] | None:
    """What is wrong with a window, as (field, reason), or None."""
    try:
        zone = ZoneInfo(window.time_zone)
    except (ZoneInfoNotFoundError, ValueError):
        return "timeZone", f"unknown time zone {window.time_zone!r} (an IANA name such as Europe/Berlin)"
    try:
        next(CronSim(expression(window), _CHECKED_FROM.replace(tzinfo=zone)))
    except (CronSimError, StopIteration) as exc:
        return (
            "schedule",
            f"not a cron expression ({exc}): {window.schedule!r} (five fields, or six with seconds first)",
        )
    if parse_duration(window.duration) <= 0:
        return "duration", f"must be a positive duration, got {window.duration!r}"
    return None


def applies(window: DisruptionWindow, namespace: str, labels: Mapping[str, str]) -> bool:
    if window.namespaces and namespace not in window.namespaces:
        return False
    return window.label_selector is None or matches_label_selector(window.label_selector, labels)


def open_at(window: DisruptionWindow, now: datetime) -> Opening | None:
    """The window's opening that is open at `now`, if any (the latest one: it closes last)."""
    zone = ZoneInfo(window.time_zone)
    latest = next(CronSim(expression(window), (now + _TINY).astimezone(zone), reverse=True))
    closes = latest + timedelta(seconds=parse_duration(window.duration))
    if closes <= now:
        return None
    return Opening(window=window.title, opens_at=latest.astimezone(UTC), closes_at=closes.astimezone(UTC))


def next_opening(window: DisruptionWindow, now: datetime) -> Opening:
    """The window's first opening after `now`."""
    first = next(CronSim(expression(window), now.astimezone(ZoneInfo(window.time_zone))))
    closes = first + timedelta(seconds=parse_duration(window.duration))
    return Opening(window=window.title, opens_at=first.astimezone(UTC), closes_at=closes.astimezone(UTC))


class Windows:
    """The configured windows, with each one's state kept until it changes (an opening or a closing), so a
    job costs a dictionary lookup per window that applies to it, not a cron evaluation."""

    def __init__(self, windows: Sequence[DisruptionWindow]) -> None:
        self.windows = list(windows)
        # window -> (valid from, valid until, open now, next opening)
        self._states: dict[int, tuple[datetime, datetime, Opening | None, Opening]] = {}

    def __bool__(self) -> bool:
        return bool(self.windows)

    def at(self, namespace: str, labels: Mapping[str, str], now: datetime) -> Open | Closed | None:
        """For a pod: None when no window applies to it, else whether one is open and which."""
        opened: Opening | None = None
        upcoming: Opening | None = None
        for i, window in enumerate(self.windows):
            if not applies(window, namespace, labels):
                continue
            current, following = self._state(i, now)
            if current is not None and (opened is None or current.closes_at > opened.closes_at):
                opened = current
            if upcoming is None or following.opens_at < upcoming.opens_at:
                upcoming = following
        if opened is not None:
            return Open(opened)
        return Closed(upcoming) if upcoming is not None else None

    def _state(self, i: int, now: datetime) -> tuple[Opening | None, Opening]:
        known = self._states.get(i)
        if known is not None and known[0] <= now < known[1]:
            return known[2], known[3]
        window = self.windows[i]
        current, following = open_at(window, now), next_opening(window, now)
        until = following.opens_at if current is None else min(current.closes_at, following.opens_at)
        self._states[i] = (now, until, current, following)
        return current, following
