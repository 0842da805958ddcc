"""A CronJob's schedule as kube-controller-manager reads it (robfig/cron's standard parser): five fields
or a descriptor (`@hourly`, `@every 90s`), in the CronJob's time zone."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from shared.config.windows import CRON_MACROS
from shared.core.durations import parse_duration

EVERY = "@every "


def error(schedule: str) -> str | None:
    """Why `schedule` does not parse, in robfig/cron's words where it has them; None when it does."""
    text = schedule.strip()
    if text.startswith(EVERY):
        try:
            return None if parse_duration(text[len(EVERY) :]) > 0 else f"failed to parse duration {text}"
        except ValueError:
            return f"failed to parse duration {text}"
    if text.startswith("@"):
        return None if text in CRON_MACROS else f"unrecognized descriptor: {text}"
    fields = text.split()
    if len(fields) != 5:
        return f"expected exactly 5 fields, found {len(fields)}: {text}"
    try:
        next(CronSim(text, datetime(2000, 1, 1)))
    except (CronSimError, StopIteration) as exc:
        return str(exc)
    return None


def zone_error(name: str | None) -> str | None:
    if name is None:
        return None
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return "unknown time zone " + name
    return None


def times(schedule: str, zone: str | None, after: datetime) -> Iterator[datetime]:
    """The schedule's times after `after` (aware), in order."""
    text = schedule.strip()
    if text.startswith(EVERY):
        step = timedelta(seconds=parse_duration(text[len(EVERY) :]))
        moment = after
        while True:
            moment += step
            yield moment
    local = after.astimezone(ZoneInfo(zone or "UTC"))
    yield from CronSim(CRON_MACROS.get(text, text), local)
