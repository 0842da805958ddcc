"""Running a service process: logging, SIGTERM/SIGINT -> a stop event, the ops endpoint, exit codes."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable

from shared.config import PodherdConfig
from shared.logs import setup_logging
from shared.ops import OpsServer

log = logging.getLogger(__name__)
ServiceMain = Callable[[PodherdConfig, asyncio.Event, OpsServer], Awaitable[None]]


async def serve(name: str, config: PodherdConfig, main: ServiceMain) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    ops = OpsServer(config.http)
    await ops.start()
    log.info("%s starting", name, extra={"replica": config.replica})
    try:
        await main(config, stop, ops)
    finally:
        await ops.stop()
        log.info("%s stopped", name)


def run(name: str, config: PodherdConfig, main: ServiceMain) -> int:
    setup_logging(name, config.replica, config.logging.level, config.logging.format)
    asyncio.run(serve(name, config, main))
    return 0
