"""The Kubernetes adapter: the official client's configuration, authentication and connection pool, with
responses read as raw bytes so the hot paths decode them with msgspec instead of building the client's
model objects (which costs about 300 µs a pod; see bench/).

Requests from the event loop (`arequest`) go over aiohttp, with the server, headers and credentials the
official client hands out (asked again every few seconds, so a refreshed token is used): a request through
urllib3 in a worker thread cost about twice the CPU, and asking for the credentials on every request a third
of a request's. Blocking requests (`request`, for the CLI) and watch streams use the official client's
urllib3 pool; a stream is handed to the event loop chunk by chunk (one chunk holds one or more event
lines), with a bound on chunks in flight so a slow consumer slows the reader instead of filling memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import aiohttp
import kubernetes
import msgspec
import urllib3
from kubernetes.client import ApiClient, Configuration

from shared.api import paths
from shared.config.model import KubernetesConfig
from shared.core.backoff import describe
from shared.kube.errors import KubeError, error_from
from shared.kube.request_budget import RequestBudget
from shared.kube.stream import watch_lines

Query = Sequence[tuple[str, str]]
__all__ = ["KubeClient", "KubeError", "api_check", "error_from", "load_configuration", "unanswered"]


def encode_body(api: ApiClient, body: Any) -> bytes:
    """A request body as JSON: plain data straight through msgspec, the client's model objects (and what
    else msgspec does not know) as the official client serializes them."""
    if isinstance(body, bytes):
        return body
    try:
        return msgspec.json.encode(body)
    except TypeError:
        return msgspec.json.encode(api.sanitize_for_serialization(body))


def load_configuration(config: KubernetesConfig) -> Configuration:
    configuration = Configuration()
    if config.in_cluster:
        kubernetes.config.load_incluster_config(client_configuration=configuration)
    else:
        kubernetes.config.load_kube_config(
            config_file=config.kubeconfig, context=config.context, client_configuration=configuration
        )
    return configuration


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


async def _closed_with_loop(session: aiohttp.ClientSession) -> AsyncIterator[None]:
    """Closes `session` when its loop shuts down (`asyncio.run` closes the async generators a loop started),
    should no one have closed it before: a session must not outlive its loop with connections open."""
    try:
        yield
    finally:
        if not session.closed:
            await session.close()


def ssl_context(configuration: Configuration) -> ssl.SSLContext:
    """TLS as the official client sets it up: the cluster's CA (else the system's), a client certificate if
    the user has one, no verification only when the kubeconfig says insecure-skip-tls-verify."""
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file)
    return context


# Connections a client keeps open to the API server, as client-go's transport does per host.
CONNECTIONS = 64
# How long the credentials the official client hands out (its refresh hook re-reads a kubeconfig's token,
# an expired exec plugin's, the in-cluster token file once a minute) serve before they are asked for again:
# asking costs more than the request itself, and a token is never this close to its end when refreshed.
CREDENTIALS_FOR = 5.0


@dataclass(frozen=True)
class _Credentials:
    """The server's address and the headers every request carries (User-Agent, Authorization), as the
    official client builds them, until `until` (monotonic)."""

    host: str
    headers: dict[str, str]
    until: float

    @classmethod
    def ask(cls, api: ApiClient, serve_for: float) -> _Credentials:
        headers: dict[str, str] = {}
        api.update_params_for_auth(headers, [], ["BearerToken"], "", "", None)
        return cls(api.configuration.host, {**api.default_headers, **headers}, time.monotonic() + serve_for)


@dataclass
class _LoopSession:
    """The aiohttp session of one event loop: it serves that loop only, and closes with it should no one
    close it before (`asyncio.run` closes the async generators its loop started)."""

    session: aiohttp.ClientSession
    loop: asyncio.AbstractEventLoop
    closer: AsyncIterator[None]
    tasks: list[asyncio.Future[Any]]  # held, so that none is collected while it runs

    @classmethod
    def open(cls, configuration: Configuration, loop: asyncio.AbstractEventLoop) -> _LoopSession:
        connector = aiohttp.TCPConnector(ssl=ssl_context(configuration), limit=CONNECTIONS)
        session = aiohttp.ClientSession(connector=connector, trust_env=False)
        closer = _closed_with_loop(session)
        return cls(session, loop, closer, [loop.create_task(anext(closer, None))])

    def serves(self, loop: asyncio.AbstractEventLoop) -> bool:
        return self.loop is loop and not self.session.closed

    def drop(self) -> None:
        """Close it from wherever this is called: its own loop, another thread's, or none."""
        session, loop, current = self.session, self.loop, _running_loop()
        if session.closed:
            return
        if loop.is_closed() or (current is not None and not loop.is_running()):
            session.detach()  # its connections ended with their loop (or cannot be run from this one)
        elif not loop.is_running():
            loop.run_until_complete(session.close())
        elif current is loop:
            self.tasks.append(loop.create_task(session.close()))
        else:
            asyncio.run_coroutine_threadsafe(session.close(), loop)


@dataclass
class KubeClient:
    api: ApiClient
    _http: _LoopSession | None = field(default=None, repr=False)
    credentials_for: float = CREDENTIALS_FOR
    _credentials: _Credentials | None = field(default=None, repr=False)
    budget: RequestBudget | None = None  # requests from the event loop (`arequest`) wait for their turn

    @classmethod
    def from_config(cls, config: KubernetesConfig) -> KubeClient:
        return cls(ApiClient(load_configuration(config)), budget=RequestBudget(config.qps, config.burst))

    def close(self) -> None:
        """Close the pools; from a coroutine, `aclose` closes the event loop's connections gracefully."""
        if self._http is not None:
            self._http.drop()
            self._http = None
        with contextlib.suppress(Exception):
            self.api.close()

    async def aclose(self) -> None:
        if self._http is not None and self._http.serves(asyncio.get_running_loop()):
            with contextlib.suppress(Exception):
                await self._http.session.close()
        self.close()

    def _session(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._http is None or not self._http.serves(loop):
            if self._http is not None:
                self._http.drop()
            self._http = _LoopSession.open(self.api.configuration, loop)
        return self._http.session

    def _open(
        self,
        method: str,
        path: str,
        query: Query = (),
        *,
        body: Any = None,
        timeout: float | tuple[float, float] | None = 30.0,
        content_type: str | None = None,
    ) -> urllib3.BaseHTTPResponse:
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        method, url, headers, body, _ = self.api.param_serialize(
            method=method,
            resource_path=path,
            query_params=list(query),
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        response = self.api.call_api(method, url, headers, body, _request_timeout=timeout)
        return response.response  # type: ignore[no-any-return]

    def request(
        self,
        method: str,
        path: str,
        query: Query = (),
        *,
        body: Any = None,
        timeout: float = 30.0,
        content_type: str | None = None,
    ) -> bytes:
        """A blocking request; the raw body on 2xx, else KubeError."""
        response = self._open(method, path, query, body=body, timeout=timeout, content_type=content_type)
        data = response.data
        if response.status >= 300:
            raise error_from(response.status, data)
        return bytes(data)

    async def arequest(
        self,
        method: str,
        path: str,
        query: Query = (),
        *,
        body: Any = None,
        request_timeout: float = 30.0,
        content_type: str | None = None,
        budgeted: bool = True,
    ) -> bytes:
        """A request from the event loop; the raw body on 2xx, else KubeError. A GET whose kept-alive
        connection the server had closed is sent once more, on a new one (aiohttp does, as RFC 9112 allows
        for idempotent requests); a POST is not. Within the client's request budget (`kubernetes.qps`)
        unless not `budgeted` (a readiness probe must not wait behind the work)."""
        if self.budget is not None and budgeted:
            await self.budget.wait()
        credentials = self._credentials
        if credentials is None or time.monotonic() >= credentials.until:
            credentials = self._credentials = _Credentials.ask(self.api, self.credentials_for)
        headers = {**credentials.headers, "Accept": "application/json"}
        data = None
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
            data = encode_body(self.api, body)
        url = credentials.host + path + (f"?{urlencode(query)}" if query else "")
        configuration = self.api.configuration
        options: dict[str, Any] = {"timeout": aiohttp.ClientTimeout(total=request_timeout)}
        if configuration.tls_server_name:
            options["server_hostname"] = configuration.tls_server_name
        if configuration.proxy:
            options["proxy"] = configuration.proxy
        async with self._session().request(method, url, headers=headers, data=data, **options) as response:
            answer = await response.read()
            if response.status >= 300:
                raise error_from(response.status, answer)
            return answer

    async def get_json(self, path: str, request_timeout: float = 10.0) -> dict[str, Any] | None:
        """GET one object as plain JSON; None when it does not exist (404), KubeError for other answers."""
        try:
            body = await self.arequest("GET", path, request_timeout=request_timeout)
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise
        found: dict[str, Any] = msgspec.json.decode(body)
        return found

    async def whoami(self) -> str:
        """The user the API server authenticates these credentials as (`kubectl auth whoami`)."""
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        answer = msgspec.json.decode(await self.arequest("POST", paths.SELF_SUBJECT_REVIEWS, body=body))
        return str(((answer.get("status") or {}).get("userInfo") or {}).get("username") or "")

    async def list_items(
        self, path: str, label_selector: str, request_timeout: float = 10.0, *, field_selector: str = ""
    ) -> list[dict[str, Any]]:
        """The items of a list, narrowed by a label selector (and a field selector), as plain JSON."""
        query = [("labelSelector", label_selector)] + (
            [("fieldSelector", field_selector)] if field_selector else []
        )
        body = await self.arequest("GET", path, query, request_timeout=request_timeout)
        items: list[dict[str, Any]] = msgspec.json.decode(body).get("items") or []
        return items

    def stream(
        self,
        path: str,
        query: Query,
        read_timeout: float,
        *,
        max_chunks_in_flight: int = 64,
        opened: Callable[[], None] | None = None,
    ) -> AsyncIterator[bytes]:
        """Complete lines of a watch stream (`kube_stream.watch_lines`)."""
        return watch_lines(
            self._open,
            path,
            query,
            read_timeout=read_timeout,
            max_chunks_in_flight=max_chunks_in_flight,
            opened=opened,
        )


def unanswered(exc: BaseException) -> bool:
    """The API server did not answer, for now: no connection, one dropped, a 429 or a 5xx (not a bug)."""
    return isinstance(exc, aiohttp.ClientError) or (isinstance(exc, KubeError) and exc.retryable)


def api_check(kube: KubeClient, within: float = 1.5) -> Callable[[], Awaitable[str | None]]:
    """A readiness check: a service that cannot work without the API server is not ready while it does not
    answer. It is asked for `/version`, which every client may read (system:public-info-viewer)."""

    async def check() -> str | None:
        try:
            await kube.arequest("GET", "/version", request_timeout=within, budgeted=False)
        except KubeError as exc:
            return f"the Kubernetes API server refused: {exc}"
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            return f"the Kubernetes API server does not answer: {describe(exc)}"
        return None

    return check
