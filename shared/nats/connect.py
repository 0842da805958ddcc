"""A service's NATS connection, through every outage: attempts with backoff (`shared.core.backoff`: one line
each, naming the address and the reason), the first connection given up when the service is told to stop
(`Stopped`), and unlimited reconnections after it, rotating over the configured servers. TLS files are read
again before each reconnection (`shared.nats.access`); a refused permission is reported once."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from nats.aio.client import Client as NatsClient

from shared.config.model import NatsConfig, nats_servers
from shared.core.backoff import Backoff
from shared.nats.access import DENIED, Access

log = logging.getLogger("shared.nats.bus")
# A NATS server restarting is back within seconds: attempts stay close together (at most 5 s apart).
FIRST_DELAY_S, MAX_DELAY_S = 0.25, 5.0
CONNECT_TIMEOUT_S = 5


class Stopped(Exception):
    """The service was told to stop before its first connection: nothing to clean up, a clean exit."""


class _AttemptFailed(Exception):
    def __init__(self, reason: BaseException) -> None:
        super().__init__(str(reason))
        self.reason = reason


async def connect(
    config: NatsConfig,
    name: str,
    on_state: Callable[[str], Awaitable[None]] | None = None,
    *,
    stop: asyncio.Event | None = None,
) -> NatsClient:
    access = Access(config)
    attempts = Backoff("NATS", ",".join(nats_servers(config.url)), first=FIRST_DELAY_S, cap=MAX_DELAY_S)
    pending = 0.0  # the wait before the next reconnection attempt
    connected = False

    async def disconnected() -> None:
        if connected:
            log.warning("NATS disconnected")
        access.refresh()  # a renewed certificate serves the reconnection
        if on_state:
            await on_state("disconnected")

    async def reconnected() -> None:
        nonlocal pending
        attempts.answered()
        pending = 0.0
        if on_state:
            await on_state("reconnected")

    async def error(exc: Exception) -> None:
        nonlocal pending
        if DENIED.seen(str(exc)):
            return
        if not connected:
            raise _AttemptFailed(
                exc
            )  # out of nats-py's own first-connection loop: ours waits and tries again
        if nc.is_reconnecting:
            pending = attempts.failed(exc)
        else:
            log.warning("NATS error: %s", exc)

    def next_server(servers: list[Any], _: dict[str, Any]) -> tuple[Any, float]:
        return min(servers, key=lambda s: s.reconnects), pending  # the one tried least, in turn

    options: dict[str, Any] = {
        "name": name,
        "max_reconnect_attempts": -1,
        "connect_timeout": CONNECT_TIMEOUT_S,
        "disconnected_cb": disconnected,
        "reconnected_cb": reconnected,
        "error_cb": error,
        "reconnect_to_server_handler": next_server,
        **access.options,
    }
    while True:
        nc = NatsClient()
        try:
            await _until_stopped(nc.connect(nats_servers(config.url), **options), stop)
        except _AttemptFailed as failed:
            with contextlib.suppress(Exception):
                await nc.close()
            access.refresh()
            if stop is None:
                await asyncio.sleep(attempts.failed(failed.reason))
            elif not await attempts.pause(stop, failed.reason):
                raise Stopped from None
            continue
        except BaseException:  # stopped, or the service cancelled: nothing of this client may outlive it
            with contextlib.suppress(Exception):
                await nc.close()
            raise
        connected = True
        attempts.answered()
        return nc


async def _until_stopped(attempt: Awaitable[None], stop: asyncio.Event | None) -> None:
    """`attempt`, given up (`Stopped`) when `stop` is set first."""
    if stop is None:
        await attempt
        return
    task = asyncio.ensure_future(attempt)
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        if not task.done():  # stopped first, or this wait itself cancelled: the attempt goes with it
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
    if task.cancelled():
        raise Stopped
    task.result()
