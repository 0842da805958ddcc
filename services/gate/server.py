"""The gate's process: its webhooks served over HTTPS (the certificate reloaded when its files are renewed),
every review counted and timed, and its ops endpoint ready while the API server answers.

Paths: `/podmigrationjobs` (CREATE and UPDATE of jobs, and of their status), `/podmigrationjobs/requester`
(the mutating webhook: the author of a job made by anyone but Podherd recorded as its requester),
`/evictions` (evictions in namespaces not opted in as a whole: the pod's own label decides) and
`/evictions/namespace` (in namespaces opted in: every pod unless it opts out). A review the gate cannot
answer (the API server away, a body that is no review) is answered 500, which the API server takes as the
webhook failing: its `failurePolicy` decides."""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import web
from prometheus_client import Counter, Histogram

from services.gate.callers import Caller, Callers
from services.gate.labelled import LabelledPods
from services.gate.reviews import Request, read_review
from services.gate.webhooks import Webhooks
from shared.config.model import ConfigError, GateConfig, PodherdConfig
from shared.core.waits import cancel_and_wait, wait_event
from shared.kube.client import KubeClient, api_check
from shared.service.links import Link, linked
from shared.service.ops import OpsServer

log = logging.getLogger(__name__)
REVIEWS = Counter("podherd_gate_reviews_total", "Admission reviews answered", ["webhook", "answer"])
SECONDS = Histogram(
    "podherd_gate_review_seconds",
    "Time to answer an admission review",
    ["webhook"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
)
# Well inside the API server's timeoutSeconds (deploy/ sets 5 s for evictions, 10 s for jobs).
ANSWER_WITHIN_S = 4.0
Door = Callable[[Request, Caller], Awaitable[bytes]]


class ServingCert:
    """The webhook's certificate from files a Secret mounts: loaded again into the same context when they
    change (cert-manager renews in place), so new connections get the new one without a restart."""

    def __init__(self, config: GateConfig) -> None:
        self.cert, self.key, self.client_ca = config.cert, config.key, config.client_ca
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        if self.client_ca:  # the API server's client certificate: verified when presented
            self.context.verify_mode = ssl.CERT_OPTIONAL
            try:
                self.context.load_verify_locations(cafile=self.client_ca)
            except (OSError, ssl.SSLError) as exc:
                raise ConfigError("gate.clientCA", f"the callers' CA {self.client_ca}: {exc}") from exc
        self._seen = (0.0, 0.0)
        try:
            self.refresh()
        except (OSError, ssl.SSLError) as exc:  # never will: said once, naming the setting
            raise ConfigError(
                "gate.cert", f"the serving certificate {self.cert} (key {self.key}): {exc}"
            ) from exc

    def _stamps(self) -> tuple[float, float]:
        return Path(self.cert).stat().st_mtime, Path(self.key).stat().st_mtime

    def refresh(self) -> None:
        stamps = self._stamps()
        if stamps != self._seen:
            self.context.load_cert_chain(self.cert, self.key)
            self._seen = stamps
            log.info("serving certificate loaded", extra={"cert": self.cert})

    async def follow(self, stop: asyncio.Event, every: float = 30.0) -> None:
        while not await wait_event(stop, every):
            try:
                self.refresh()
            except (OSError, ssl.SSLError) as exc:  # half-written: the old one stays until the next look
                log.warning("serving certificate not reloaded: %s", exc)


def routes(hooks: Webhooks) -> web.Application:
    doors: dict[str, Door] = {
        "podmigrationjobs": lambda r, _: hooks.job_write(r),
        "podmigrationjobs-requester": lambda r, _: hooks.job_requester(r),
        "evictions": lambda r, caller: hooks.eviction(r, namespace_opted=False, caller=caller),
        "evictions-namespace": lambda r, caller: hooks.eviction(r, namespace_opted=True, caller=caller),
    }
    app = web.Application(client_max_size=8 << 20)
    for path, name in (
        ("/podmigrationjobs", "podmigrationjobs"),
        ("/podmigrationjobs/requester", "podmigrationjobs-requester"),
        ("/evictions", "evictions"),
        ("/evictions/namespace", "evictions-namespace"),
    ):
        app.router.add_post(path, _serving(name, doors[name], hooks.callers))
    return app


def _serving(webhook: str, door: Door, callers: Callers) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handle(http: web.Request) -> web.Response:
        started = time.perf_counter()
        try:
            request = read_review(await http.read())
        except ValueError as exc:
            REVIEWS.labels(webhook, "malformed").inc()
            return web.Response(status=400, text=f"{exc}\n")
        caller = callers.of(http.transport.get_extra_info("peercert") if http.transport else None)
        try:
            async with asyncio.timeout(ANSWER_WITHIN_S):
                body = await door(request, caller)
        except Exception as exc:  # answered as a failing webhook: the configuration's failurePolicy applies
            REVIEWS.labels(webhook, "error").inc()
            log.warning("%s review %s not answered: %r", webhook, request.uid, exc)
            return web.Response(status=500, text="the gate could not decide\n")
        finally:
            SECONDS.labels(webhook).observe(time.perf_counter() - started)
        REVIEWS.labels(webhook, "allowed" if b'"allowed":true' in body else "denied").inc()
        return web.Response(body=body, content_type="application/json")

    return handle


async def main(config: PodherdConfig, stop: asyncio.Event, ops: OpsServer) -> None:
    async with linked("gate", config, stop, ops=ops, nats=Link.NONE, kube=Link.UNCHECKED) as links:
        await _serve(config, links.kube, stop, ops=ops)


async def _serve(config: PodherdConfig, kube: KubeClient, stop: asyncio.Event, *, ops: OpsServer) -> None:
    cert = ServingCert(config.gate)
    labelled = LabelledPods(kube)
    following = asyncio.create_task(labelled.run(stop), name="opted-in pods")
    hooks = Webhooks(config, kube, labelled)
    runner = web.AppRunner(routes(hooks), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, config.http.host, config.gate.port, ssl_context=cert.context)
    await site.start()
    sockets = getattr(site._server, "sockets", None) or []
    port = int(sockets[0].getsockname()[1]) if sockets else config.gate.port
    log.info("webhook endpoint on %s:%s", config.http.host, port)
    ops.add_check("kubernetes", api_check(kube))  # ready once the webhook endpoint listens
    ops.add_check("opted-in pods", labelled.ready)
    try:
        await cert.follow(stop)
    finally:
        await cancel_and_wait(following)
        await runner.cleanup()
