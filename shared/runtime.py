"""Running a service process: logging, SIGTERM/SIGINT -> a stop event, the ops endpoint, exit codes."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable, Callable

from nats.aio.client import Client as NatsClient

from shared.config import PodherdConfig
from shared.logs import setup_logging
from shared.nats_access import DENIED
from shared.ops import OpsServer

log = logging.getLogger(__name__)
ServiceMain = Callable[[PodherdConfig, asyncio.Event, OpsServer], Awaitable[None]]


async def serve(name: str, config: PodherdConfig, main: ServiceMain) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    DENIED.handler = lambda _: stop.set()  # a permission NATS refuses is never granted by waiting
    ops = OpsServer(config.http)
    await ops.start()
    log.info("%s starting", name, extra={"replica": config.replica})
    warn_if_open(config, name)
    try:
        await main(config, stop, ops)
    finally:
        await ops.stop()
        log.info("%s stopped", name)


def warn_if_open(config: PodherdConfig, service: str) -> None:
    """One line at start when intents are not authorized (or only audited): who can then do what."""
    intents = config.intents
    if intents.authorization == "none":
        log.warning(
            "%s: intents.authorization is none: anyone who can publish on NATS may move any pod and drain "
            "any node with Podherd's rights",
            service,
        )
    elif intents.enforcement == "audit":
        log.warning(
            "%s: intents.enforcement is audit: intents that would be refused are logged and audited, "
            "and carried out",
            service,
        )


def nats_check(nc: NatsClient) -> Callable[[], Awaitable[str | None]]:
    """A readiness check: the service is not ready while its NATS connection is down."""

    async def check() -> str | None:
        return None if nc.is_connected else "not connected to NATS"

    return check


async def close_nats(nc: NatsClient) -> None:
    """Flush what is written and close; never waits out a drain of pull subscriptions (30 s by default)."""
    with contextlib.suppress(Exception):
        await nc.flush(timeout=2)
    with contextlib.suppress(Exception):
        await nc.close()


def run(name: str, config: PodherdConfig, main: ServiceMain) -> int:
    setup_logging(name, config.replica, config.logging.level, fmt=config.logging.format)
    asyncio.run(serve(name, config, main))
    return _exit_code()


def _exit_code() -> int:
    """1 when NATS refused a permission (the one error line said which), else 0."""
    return 1 if DENIED.first is not None else 0


def run_together(config: PodherdConfig, mains: dict[str, ServiceMain]) -> int:
    """Several services in one process (`podherd run all`): one ops endpoint and stop; a failure stops all."""

    async def together(config: PodherdConfig, stop: asyncio.Event, ops: OpsServer) -> None:
        async with asyncio.TaskGroup() as group:
            for name, main in mains.items():
                group.create_task(_awaited(main(config, stop, ops.scoped(name))), name=name)

    setup_logging("all", config.replica, config.logging.level, fmt=config.logging.format)
    asyncio.run(serve("+".join(mains), config, together))
    return _exit_code()


async def _awaited(awaitable: Awaitable[None]) -> None:
    await awaitable
