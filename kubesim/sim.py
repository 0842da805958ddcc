"""Running kubesim: the store, the API server and the control loops on one event loop.

`start_in_thread()` runs it inside the calling process on a background thread (tests, benchmarks);
`start_subprocess()` runs `podherd sim` as a separate process (the demo, where the services are separate
processes too). Both return a handle with the URL and a kubeconfig path that the official client and kubectl
use as they would for any cluster.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import functools
import logging
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml
from aiohttp import web

from kubesim.apiserver import kinds
from kubesim.apiserver import serving as tls
from kubesim.apiserver.admission import Admission
from kubesim.apiserver.errors import ApiError
from kubesim.apiserver.server import ApiServer
from kubesim.apiserver.store import Store
from kubesim.controllers.base import Controller
from kubesim.controllers.cronjobs import CronJobs
from kubesim.controllers.daemonsets import DaemonSets
from kubesim.controllers.evacuation import Evacuator
from kubesim.controllers.jobs import Jobs
from kubesim.controllers.namespaces import NamespaceController
from kubesim.controllers.pdb import PdbController
from kubesim.controllers.recorder import record_event
from kubesim.controllers.scheduler import Scheduler
from kubesim.controllers.volumes import Volumes
from kubesim.controllers.workloads import Workloads
from kubesim.interceptor import Interceptor
from kubesim.kubelet.pod_files import MountError
from kubesim.kubelet.pods import Kubelet
from kubesim.kubelet.runtime import ProcessRuntime
from kubesim.options import SimOptions
from kubesim.scenario import load_scenario
from shared.access.private_files import write_private

log = logging.getLogger("kubesim")
T = TypeVar("T")
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


class Simulator:
    def __init__(self, options: SimOptions | None = None, tls_names: tuple[str, ...] = ()) -> None:
        self.options = options or SimOptions()
        self.tls = tls.issue(tls_names)
        self.store = Store(kinds.registry(), history=self.options.history)
        self.store.verbs.admission.append(Admission(self.store))
        self.api = ApiServer(self.store, self.options)
        self.authorizer = self.api.authorizer
        self.controllers: list[Controller[Any]] = []
        self.runtime: ProcessRuntime | None = None
        self._runner: web.AppRunner | None = None
        self.interceptor: Interceptor | None = None  # KubeVirt's eviction webhook (`evict_in_background`)
        self.port = 0
        for name in DEFAULT_NAMESPACES:
            self.store.verbs.create(self.store.registry.core("namespaces"), "", {"metadata": {"name": name}})
        self.store.verbs.create(self.store.registry.core("services"), "default", _master_service())

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> None:
        opts = self.options
        # The API server's own, always on; it also publishes kube-root-ca.crt into every namespace.
        self.controllers.append(NamespaceController(self.store, opts, self.tls.ca_pem.decode()))
        if opts.scheduler:
            self.controllers.append(Scheduler(self.store, opts))
        if opts.workloads:
            self.controllers.append(Workloads(self.store, opts))
            self.controllers.append(DaemonSets(self.store, opts))
            self.controllers.append(Jobs(self.store, opts))
            self.controllers.append(CronJobs(self.store, opts))
            self.controllers.append(Volumes(self.store, opts))
        if opts.kubelet:
            if opts.images:
                self.runtime = ProcessRuntime(self.store, opts, self._pod_token, event=self._kubelet_event)
            kubelet = Kubelet(self.store, opts, self.runtime)
            if self.runtime is not None:
                self.runtime.changed = kubelet.mark
                self.api.resources.container_log = self.runtime.log
            self.controllers.append(kubelet)
        if opts.pdb:
            self.controllers.append(PdbController(self.store, opts))
        if opts.evict_in_background:
            self.controllers.append(Evacuator(self.store, opts))
        for controller in self.controllers:
            controller.start()
        self._runner = web.AppRunner(
            self.api.app(), access_log=None, handler_cancellation=True, shutdown_timeout=5.0
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port, backlog=1024, ssl_context=self.tls.server_context())
        await site.start()
        server = site._server
        assert isinstance(server, asyncio.base_events.Server)
        self.port = int(server.sockets[0].getsockname()[1])
        self.url = f"https://{host}:{self.port}"
        if self.runtime is not None:
            self.runtime.network.api_address = ("127.0.0.1" if host in ("0.0.0.0", "") else host, self.port)
        if opts.evict_in_background:
            self.interceptor = Interceptor(self.store, opts, self.tls)
            local = "127.0.0.1" if host in ("0.0.0.0", "") else host
            await self.interceptor.start(f"https://{local}:{self.port}")

    def _pod_token(self, pod: dict[str, Any], account: str, seconds: int, audience: str) -> str:
        """The kubelet's TokenRequest for a pod's projected ServiceAccount token, bound to the pod."""
        meta = pod["metadata"]
        bound = {"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"]}
        spec = {
            "expirationSeconds": seconds,
            "audiences": [audience] if audience else [],
            "boundObjectRef": bound,
        }
        try:
            answer = self.api.auth.request_token(meta["namespace"], account, {"spec": spec})
        except ApiError as exc:
            raise MountError(f"failed to fetch token: {exc.message}") from exc
        return str(answer["status"]["token"])

    def _kubelet_event(self, pod: dict[str, Any], kind: str, reason: str, message: str) -> None:
        if self.options.record_events:
            record_event(
                self.store,
                self.store.registry.core("events"),
                pod,
                kind=kind,
                reason=reason,
                message=message,
                component="kubelet",
            )

    async def stop(self) -> None:
        if self.interceptor is not None:
            await self.interceptor.stop()
        if self.runtime is not None:
            await self.runtime.close()  # the pods' processes end as on deletion: SIGTERM, then the grace
        self.api.close_watches()
        await self.api.resources.close_clients()
        for controller in self.controllers:
            await controller.stop()
        if self._runner is not None:
            server = self._runner.server
            transports = [c.transport for c in (server.connections if server else []) if c.transport]
            await self._runner.cleanup()
            # A TLS connection's close waits for the client's close_notify, which a client that keeps its
            # connection pooled never sends: end them, as a stopping API server drops its connections.
            for transport in transports:
                transport.abort()
            await asyncio.sleep(0)


def _master_service() -> dict[str, Any]:
    """The `kubernetes` Service the API server keeps in `default` (its address is what in-cluster clients
    read from KUBERNETES_SERVICE_HOST)."""
    return {
        "metadata": {"name": "kubernetes", "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {
            "clusterIP": tls.KUBERNETES_SERVICE_IP,
            "clusterIPs": [tls.KUBERNETES_SERVICE_IP],
            "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}],
            "type": "ClusterIP",
            "sessionAffinity": "None",
        },
    }


def kubeconfig_ca(path: Path) -> bytes:
    """The CA a kubeconfig's (first) cluster is trusted by."""
    cluster = yaml.safe_load(path.read_text())["clusters"][0]["cluster"]
    return base64.b64decode(cluster["certificate-authority-data"])


def kubeconfig_token(path: Path) -> str:
    """The bearer token a kubeconfig's (first) user presents."""
    return str(yaml.safe_load(path.read_text())["users"][0]["user"]["token"])


def write_kubeconfig(
    url: str,
    path: Path,
    token: str | None,
    *,
    ca_pem: bytes | None = None,
    name: str = "kubesim",
    cert: tuple[bytes, bytes] | None = None,
) -> Path:
    """A kubeconfig for `url` (trusting `ca_pem`) whose user presents `token` (kubesim's administrator
    token, or a ServiceAccount's from a TokenRequest) or a client certificate and its key (`cert`)."""
    cluster: dict[str, str] = {"server": url}
    if ca_pem is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": _credentials(token, cert)}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name, "namespace": "default"}}],
        "current-context": name,
        "preferences": {},
    }
    return write_private(path, yaml.safe_dump(config))


def _credentials(token: str | None, cert: tuple[bytes, bytes] | None) -> dict[str, str]:
    if cert is not None:
        data = (base64.b64encode(part).decode() for part in cert)
        return dict(zip(("client-certificate-data", "client-key-data"), data, strict=True))
    return {"token": token or ""}


@dataclass
class SimHandle:
    """A running kubesim: its URL, a kubeconfig for it, and a way to run code on its loop. The real engine
    (podherd.realcluster) hands out the same, with `engine` "real" and no loop."""

    url: str
    kubeconfig: Path
    engine: str = "kubesim"
    started_in: float = 0.0  # seconds from start to ready (the real engine's)
    cpu_probe: Callable[[], float] | None = None  # the real engine's: its components' CPU seconds so far
    sim: Simulator | None = None
    loop: asyncio.AbstractEventLoop | None = None
    process: subprocess.Popen[bytes] | None = None
    _thread: threading.Thread | None = None
    _cleanup: list[Callable[[], None]] = field(default_factory=list)

    @functools.cached_property
    def admin_token(self) -> str:
        """The administrator's bearer token: only in the kubeconfig kubesim wrote."""
        return kubeconfig_token(self.kubeconfig)

    @property
    def admin_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.admin_token}"}

    @functools.cached_property
    def ca_pem(self) -> bytes:
        """kubesim's CA, as its kubeconfig carries it."""
        return kubeconfig_ca(self.kubeconfig)

    @property
    def ssl_context(self) -> ssl.SSLContext:
        """For requests made without the kubeconfig (raw HTTP in tests and benchmarks)."""
        return ssl.create_default_context(cadata=self.ca_pem.decode())

    def cpu_seconds(self) -> float | None:
        """CPU time the simulator's thread has used so far (from /proc), for benchmarks; None when kubesim
        runs in another process or the kernel does not say."""
        if self.cpu_probe is not None:
            return self.cpu_probe()
        tid = self._thread.native_id if self._thread is not None else None
        try:
            stat = Path(f"/proc/self/task/{tid}/stat").read_text() if tid is not None else ""
        except OSError:
            return None
        fields = stat.rsplit(")", 1)[-1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK") if len(fields) > 12 else None

    def kubeconfig_for(self, path: Path, token: str) -> Path:
        """A kubeconfig for this kubesim presenting `token` (a ServiceAccount's)."""
        return write_kubeconfig(self.url, path, token, ca_pem=self.ca_pem)

    def kubeconfig_with_cert(self, path: Path, user: str, groups: tuple[str, ...] = ()) -> Path:
        """A kubeconfig for this kubesim whose user presents a client certificate of kubesim's CA."""
        assert self.sim is not None
        cert, key = self.sim.tls.client_cert(user, groups)
        return write_kubeconfig(self.url, path, None, ca_pem=self.ca_pem, cert=(cert, key))

    def call(self, fn: Callable[[Simulator], T], timeout: float = 30.0) -> T:
        """Run `fn(sim)` on the simulator's loop (in-process handles only) and return its result."""
        if self.sim is None or self.loop is None:
            raise RuntimeError("call() needs an in-process simulator")
        sim = self.sim

        async def run() -> T:
            return fn(sim)

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout)

    def stop(self) -> None:
        hung = None
        if self.sim is not None and self.loop is not None and self.loop.is_running():
            try:
                asyncio.run_coroutine_threadsafe(self.sim.stop(), self.loop).result(15)
            except concurrent.futures.TimeoutError:
                hung = RuntimeError("kubesim did not stop within 15 s")
            self.loop.call_soon_threadsafe(self.loop.stop)
            if self._thread is not None:
                self._thread.join(15)
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)  # a loaded machine (a full test run) can take a while to drain
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        for cleanup in self._cleanup:
            cleanup()
        self._cleanup.clear()
        if hung is not None:
            raise hung


def start_in_thread(
    options: SimOptions | None = None,
    scenario: str | dict[str, Any] | None = None,
    kubeconfig: Path | None = None,
) -> SimHandle:
    sim = Simulator(options)
    loop = asyncio.new_event_loop()
    ready: concurrent.futures.Future[None] = concurrent.futures.Future()

    def run() -> None:
        asyncio.set_event_loop(loop)

        async def boot() -> None:
            try:
                if scenario is not None:
                    load_scenario(sim, scenario)
                await sim.start()
            except BaseException as exc:
                ready.set_exception(exc)
                raise
            ready.set_result(None)

        boot_task = loop.create_task(boot())
        loop.run_forever()
        del boot_task
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()

    thread = threading.Thread(target=run, name="kubesim", daemon=True)
    thread.start()
    ready.result(120)
    handle = SimHandle(url=sim.url, kubeconfig=Path(), sim=sim, loop=loop, _thread=thread)
    if kubeconfig is None:
        directory = Path(tempfile.mkdtemp(prefix="kubesim-"))
        kubeconfig = directory / "kubeconfig"
        handle._cleanup.append(lambda: _rmtree(directory))
    handle.kubeconfig = write_kubeconfig(sim.url, kubeconfig, sim.api.auth.admin_token, ca_pem=sim.tls.ca_pem)
    return handle


def start_subprocess(
    scenario: str | None = None,
    kubeconfig: Path | None = None,
    extra_args: list[str] | None = None,
    *,
    timeout: float = 120.0,
) -> SimHandle:
    directory = Path(tempfile.mkdtemp(prefix="kubesim-"))
    kubeconfig = kubeconfig or directory / "kubeconfig"
    argv = [sys.executable, "-m", "podherd", "sim", "--port", "0", "--kubeconfig", str(kubeconfig)]
    if scenario:
        argv += ["--scenario", scenario]
    argv += extra_args or []
    log_path = directory / "kubesim.log"
    with open(log_path, "wb") as log_file:
        process = subprocess.Popen(
            argv,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"kubesim exited with {process.returncode}: {log_path.read_text()[-2000:]}")
        if kubeconfig.exists() and kubeconfig.stat().st_size:
            url = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
            handle = SimHandle(url=url, kubeconfig=kubeconfig, process=process)
            handle._cleanup.append(lambda: _rmtree(directory))
            return handle
        time.sleep(0.05)
    process.kill()
    raise TimeoutError(f"kubesim did not start within {timeout:.0f}s")


def _rmtree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def _write_file(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


async def serve_forever(
    options: SimOptions,
    scenario: str | dict[str, Any] | None,
    port: int,
    *,
    kubeconfig: Path | None,
    host: str = "127.0.0.1",
    advertise_url: str | None = None,
    ready: Callable[[Path], None] | None = None,
    webhook_ca: Path | None = None,
) -> None:
    """`podherd sim`: load, serve, write the kubeconfig last (it signals readiness), stop on SIGTERM.
    `advertise_url` is the server address the kubeconfig names (`https://kubesim:6443` in compose); `ready`
    is called with the kubeconfig before it takes its name, so that the name says all is done. With
    `webhook_ca`, webhooks are called with a client certificate for `kube-apiserver` of kubesim's CA, which
    is written there (what a webhook such as Podherd's gate verifies its callers by: its `clientCA`)."""
    advertised = urllib.parse.urlparse(advertise_url).hostname if advertise_url else None
    sim = Simulator(options, tls_names=(advertised,) if advertised else ())
    if webhook_ca is not None:
        options.webhook_client = sim.tls.client_cert("kube-apiserver")
        await asyncio.to_thread(_write_file, webhook_ca, sim.tls.ca_pem)
    if scenario:
        load_scenario(sim, scenario)
    await sim.start(host=host, port=port)
    if kubeconfig is not None:
        tmp = kubeconfig.with_suffix(".tmp")
        write_kubeconfig(advertise_url or sim.url, tmp, sim.api.auth.admin_token, ca_pem=sim.tls.ca_pem)
        if ready is not None:
            await asyncio.to_thread(ready, tmp)  # requests to this very server: not on its loop
        tmp.replace(kubeconfig)
    print(f"kubesim serving {sim.url}" + (f"; kubeconfig {kubeconfig}" if kubeconfig else ""), flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await sim.stop()
