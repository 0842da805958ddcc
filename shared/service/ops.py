"""Every service's operational endpoint: /healthz (alive), /readyz (able to do its job), /metrics."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest

from shared.config.model import HttpConfig

log = logging.getLogger(__name__)
ReadyCheck = Callable[[], Awaitable[str | None]]  # None when ready, else why not
CHECK_DEADLINE = 2.0  # a check that does not answer in time (Redis stopped, say) says not ready


class OpsServer:
    def __init__(
        self,
        config: HttpConfig,
        registry: CollectorRegistry = REGISTRY,
        *,
        check_deadline: float = CHECK_DEADLINE,
    ) -> None:
        self.config = config
        self.registry = registry
        self.check_deadline = check_deadline
        self.checks: dict[str, ReadyCheck] = {}
        self._runner: web.AppRunner | None = None
        self.port = 0
        self._prefix = ""
        self._starting: set[str] = set()  # services not ready before they register their checks

    def starting(self) -> None:
        """Not ready until this service registers its first check (once connected): a pod is not sent work
        from its first second on."""
        self._starting.add(self._prefix)

    def started(self) -> None:
        self._starting.discard(self._prefix)

    def add_check(self, name: str, check: ReadyCheck) -> None:
        self.checks[self._prefix + name] = check
        self.started()

    def scoped(self, service: str) -> OpsServer:
        """A view for one of several services sharing this endpoint: its checks are named `service/check`."""
        view = OpsServer(self.config, self.registry)
        view.checks, view._starting = self.checks, self._starting
        view._prefix = f"{service}/"
        return view

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.config.host, self.config.port)
        await site.start()
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        self.port = int(sockets[0].getsockname()[1]) if sockets else self.config.port
        log.info("ops endpoint on %s:%s", self.config.host, self.port)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _healthz(self, _: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _readyz(self, _: web.Request) -> web.Response:
        problems = {f"{prefix}start": "starting: not connected yet" for prefix in self._starting}
        for name, check in self.checks.items():
            try:
                async with asyncio.timeout(self.check_deadline):
                    why = await check()
            except TimeoutError:
                why = f"no answer within {self.check_deadline:g}s"
            except Exception as exc:
                why = f"check failed: {exc!r}"
            if why:
                problems[name] = why
        if problems:
            text = "".join(f"{name}: {why}\n" for name, why in sorted(problems.items()))
            return web.Response(status=503, text=text)
        return web.Response(text="ready\n")

    async def _metrics(self, _: web.Request) -> web.Response:
        body = generate_latest(self.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})
