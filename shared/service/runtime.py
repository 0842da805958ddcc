"""Running a service process: logging, SIGTERM/SIGINT -> a stop event, the ops endpoint, exit codes."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import signal
from collections.abc import Awaitable, Callable

from nats.aio.client import Client as NatsClient

from shared.config.model import PodherdConfig
from shared.core.waits import when_set
from shared.nats.access import DENIED
from shared.nats.connect import Stopped
from shared.service.logs import setup_logging
from shared.service.ops import OpsServer

log = logging.getLogger(__name__)
ServiceMain = Callable[[PodherdConfig, asyncio.Event, OpsServer], Awaitable[None]]
# How long a service told to stop may take to end by itself (deploy/ gives a pod 45 s).
STOP_GRACE_S = 8.0


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
    ops.starting()
    running = asyncio.create_task(_until_stopped(main(config, stop, ops)))
    stopping = when_set(stop, lambda: _cancel_after(running, STOP_GRACE_S))
    try:
        await asyncio.wait({running})
        if not running.cancelled():  # cancelled: by `_cancel_after`, past the grace a stop has
            running.result()
    finally:
        stopping.cancel()
        await ops.stop()
        log.info("%s stopped", name)


async def _until_stopped(work: Awaitable[None]) -> None:
    try:
        await work
    except Stopped:
        log.info("stopped before NATS could be reached")


def _cancel_after(task: asyncio.Task[None], seconds: float) -> None:
    """A service told to stop that has not ended `seconds` later (a dependency that does not answer holds
    it) is cancelled: SIGTERM always ends it, and what it had not acknowledged is delivered again."""

    def cancel() -> None:
        if not task.done():
            log.warning("not stopped within %.0fs of the stop signal: cancelling what is left", seconds)
            task.cancel()

    asyncio.get_running_loop().call_later(seconds, cancel)


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
    with asyncio.Runner(loop_factory=loop_factory(config.event_loop)) as runner:
        runner.run(serve(name, config, main))
    return _exit_code()


def loop_factory(kind: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The event loop `eventLoop` names: uvloop's cuts the services' CPU per job by about a tenth (the
    end-to-end benchmark), most of it in the HTTP, NATS and Redis clients' socket work."""
    if kind == "uvloop":
        factory: Callable[[], asyncio.AbstractEventLoop] = importlib.import_module("uvloop").new_event_loop
        return factory
    return None


def _exit_code() -> int:
    """1 when NATS refused a permission (the one error line said which), else 0."""
    return 1 if DENIED.first is not None else 0


def run_together(config: PodherdConfig, mains: dict[str, ServiceMain]) -> int:
    """Several services in one process (`podherd run all`): one ops endpoint and stop; a failure stops all."""

    async def together(config: PodherdConfig, stop: asyncio.Event, ops: OpsServer) -> None:
        views = {name: ops.scoped(name) for name in mains}
        for view in views.values():
            view.starting()
        ops.started()  # each service is ready or not by itself
        async with asyncio.TaskGroup() as group:
            for name, main in mains.items():
                group.create_task(_until_stopped(main(config, stop, views[name])), name=name)

    setup_logging("all", config.replica, config.logging.level, fmt=config.logging.format)
    with asyncio.Runner(loop_factory=loop_factory(config.event_loop)) as runner:
        runner.run(serve("+".join(mains), config, together))
    return _exit_code()
