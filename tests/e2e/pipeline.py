"""The four services on kubesim with real NATS and Redis, each with its own connections, as in production
(in this process, so tests can stop and start single replicas)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import nats

from kubesim.sim import SimHandle
from podherd.harness.servers import Server
from podherd.install import install, requester_file, service_kubeconfig
from podherd.nats_pki import Pki
from services.arbitrator.service import Arbitrator
from services.executor.service import CONSUMER as EXECUTOR_CONSUMER
from services.executor.service import Executor
from services.tracker.service import Tracker
from services.watcher.service import Watcher
from shared.api import codec
from shared.api.messages import AuditRecord
from shared.config.loader import config_from_dict
from shared.config.model import KubernetesConfig, NatsConfig, PodherdConfig, RedisConfig, nats_servers
from shared.core.waits import cancel_and_wait
from shared.kube.client import KubeClient
from shared.nats import bus
from shared.nats.access import DENIED, Access
from shared.redis import client as redis_client
from tests.kube import Kube, watch_until
from tests.polling import until

GROUP, VERSION, PLURAL = "scheduling.koordinator.sh", "v1alpha1", "podmigrationjobs"
TERMINAL = ("Succeeded", "Failed", "Aborted")


def pipeline_config(
    handle: SimHandle,
    nats_srv: Server,
    redis_srv: Server,
    prefix: str,
    replica: str = "r0",
    watch: list[str] | None = None,
    **migration: Any,
) -> PodherdConfig:
    return config_from_dict(
        {
            "nats": {"url": nats_srv.url, "subjectPrefix": prefix},
            "redis": {"url": redis_srv.url, "keyPrefix": prefix},
            "kubernetes": {"kubeconfig": str(handle.kubeconfig)},
            "intents": {"tokenFile": str(requester(handle))},
            "replica": replica,
            "watcher": {"checkpointInterval": "200ms", **({"kinds": watch} if watch else {})},
            "migrationController": {
                "evictQPS": 1000,
                "evictBurst": 1000,
                "objectLimiters": {"workload": {"duration": "1s", "maxMigrating": 1000, "burst": 1000}},
                **migration,
            },
        }
    )


def requester(handle: SimHandle) -> Path:
    """The token file of the tests' intent sender (ServiceAccount podherd/tests, bound to the requester roles
    of deploy/rbac), made once per cluster: intents are authorized as in deploy/."""
    path = handle.kubeconfig.with_name("requester.token")
    if not path.exists():
        admin = KubeClient.from_config(KubernetesConfig(kubeconfig=str(handle.kubeconfig)))
        try:
            install(admin, rbac=True)
            requester_file(admin, path, audience="podherd", name="tests")
        finally:
            admin.close()
    return path


async def _noted(exc: Exception) -> None:
    """A service's NATS errors: a refused permission is recorded (`DENIED`), as in a service process."""
    DENIED.seen(str(exc))


@dataclass
class Running:
    name: str
    task: asyncio.Task[None]
    stop: asyncio.Event
    closers: list[Callable[[], Any]] = field(default_factory=list)
    answering: asyncio.Event | None = None  # a tracker's: set once its intake answers requests


class Pipeline:
    """The services, each as its own ServiceAccount (installed with Podherd's RBAC from `deploy/`)."""

    def __init__(
        self, config: PodherdConfig, pki: Pki | None = None, redis_users: dict[str, RedisConfig] | None = None
    ) -> None:
        self.config = config
        self.pki = pki  # with one: TLS to NATS, each service as its own NATS user
        self.redis_users = redis_users or {}  # each service's own Redis user
        self.running: list[Running] = []
        self.kubeconfigs: dict[str, KubernetesConfig] = {}

    def _kubernetes(self, service: str) -> KubernetesConfig:
        if service not in self.kubeconfigs:
            admin_path = Path(self.config.kubernetes.kubeconfig or "")
            admin = KubeClient.from_config(self.config.kubernetes)
            try:
                if not self.kubeconfigs:  # once per pipeline
                    install(admin, rbac=True)
                path = service_kubeconfig(
                    admin, admin_path, service, path=admin_path.with_name(f"kubeconfig-{service}")
                )
            finally:
                admin.close()
            self.kubeconfigs[service] = KubernetesConfig(kubeconfig=str(path))
        return self.kubeconfigs[service]

    async def start(self, service: str, replica: str = "r0", cls: type[Any] | None = None) -> Running:
        config = self.config
        nc = await nats.connect(
            nats_servers(config.nats.url),
            name=f"podherd-{service}-{replica}",
            error_cb=_noted,
            **Access(self.nats_as(f"podherd-{service}")).options,
        )
        kube = KubeClient.from_config(self._kubernetes(service))
        # As the services connect (through Sentinels too), each named for itself.
        redis = self.redis_users.get(service, config.redis)
        client = redis_client.connect(redis, name=f"podherd-{service}-{replica}")
        stop = asyncio.Event()
        runner: Any
        if cls is not None:  # a service with a fault injected (tests)
            runner = (
                cls(config, nc, client, kube=kube)
                if service in ("arbitrator", "tracker")
                else cls(config, nc, kube)
            )
        elif service == "watcher":
            runner = Watcher(config, nc, kube)
        elif service == "arbitrator":
            runner = Arbitrator(config, nc, client, kube=kube)
        elif service == "executor":
            runner = Executor(config, nc, kube)
        else:
            runner = Tracker(config, nc, client, kube=kube)
        task = asyncio.create_task(runner.run(stop), name=f"{service}-{replica}")
        running = Running(f"{service}-{replica}", task, stop, [nc.close, client.aclose, kube.aclose])
        intake = getattr(runner, "intake", None)
        running.answering = intake.answering if intake is not None else None
        self.running.append(running)
        return running

    def nats_as(self, user: str) -> NatsConfig:
        """The NATS settings of `user` (its certificate, with a PKI)."""
        if self.pki is None:
            return self.config.nats
        return msgspec.structs.replace(self.config.nats, tls=self.pki.tls(user))

    async def ready(self) -> None:
        """Once every tracker answers requests (an intent sent now finds one): as long as that takes on a busy
        machine (the test's timeout bounds it), but a service that ended meanwhile fails it at once."""
        answering = [asyncio.create_task(r.answering.wait()) for r in self.running if r.answering is not None]
        services: dict[asyncio.Future[Any], str] = {r.task: r.name for r in self.running}
        try:
            while not all(w.done() for w in answering):
                done, _ = await asyncio.wait([*answering, *services], return_when=asyncio.FIRST_COMPLETED)
                ended = [services[t] for t in done if t in services]
                assert not ended, f"{', '.join(ended)} ended before every tracker answered"
        finally:
            for waiting in answering:
                waiting.cancel()

    async def stop(self, running: Running) -> None:
        running.stop.set()
        with contextlib.suppress(Exception):
            async with asyncio.timeout(15):
                await running.task
        await self._closed(running)

    async def _closed(self, running: Running) -> None:
        """Its connections closed (whatever fails to close, dropped) and it is no longer running."""
        for close in running.closers:
            with contextlib.suppress(Exception):
                result = close()
                if asyncio.iscoroutine(result):
                    await result
        self.running.remove(running)

    async def kill(self, running: Running) -> None:
        """As SIGKILL would: no shutdown at all, connections dropped."""
        await cancel_and_wait(running.task)  # again while a library swallows the cancellation (nats-py)
        await self._closed(running)


@contextlib.asynccontextmanager
async def pipeline(
    config: PodherdConfig,
    replicas: int = 1,
    pki: Pki | None = None,
    redis_users: dict[str, RedisConfig] | None = None,
) -> AsyncIterator[Pipeline]:
    p = Pipeline(config, pki, redis_users)
    # The streams made first, as the tracker would (the one service that may make them all).
    nc = await nats.connect(nats_servers(config.nats.url), **Access(p.nats_as("podherd-tracker")).options)
    subjects = bus.Subjects(config.nats.subject_prefix)

    async def streams() -> None:
        await bus.ensure_events_stream(nc.jetstream(), subjects, config.nats)
        await bus.ensure_work_streams(nc.jetstream(), subjects, config.nats)

    # As the tracker makes them: again while JetStream cannot answer yet (a cluster just formed, busy).
    async with asyncio.timeout(60):
        await bus.prepared(asyncio.Event(), streams, "the test's streams")
    await nc.close()
    try:
        await p.start("watcher")
        for i in range(replicas):
            for service in ("arbitrator", "executor", "tracker"):
                await p.start(service, f"r{i}")
        await p.ready()
        yield p
    finally:  # also when starting failed: nothing a test started outlives it
        for running in list(p.running):
            await p.stop(running)


def podherd(config: Path, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`podherd <argv> --config <config>` as a user runs it, with no server address from this environment."""
    return subprocess.run(
        [sys.executable, "-m", "podherd", *argv, "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={k: v for k, v in os.environ.items() if not k.startswith(("NATS_", "REDIS_", "KUBECONFIG"))},
    )


def create_job(kube: Kube, name: str, pod: str, namespace: str = "default", **spec: Any) -> dict[str, Any]:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PodMigrationJob",
        "metadata": {
            "name": name,
            **({"annotations": spec.pop("annotations")} if "annotations" in spec else {}),
        },
        "spec": {"podRef": {"namespace": namespace, "name": pod}, **spec},
    }
    created: dict[str, Any] = kube.custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, body)
    return created


def paused_job(kube: Kube, name: str, pod: str, status: dict[str, Any] | None = None) -> dict[str, Any]:
    """A paused job (no service moves it on), with `status` written as a tracker would write it."""
    created = create_job(kube, name, pod, paused=True)
    if status is not None:
        created["status"] = status
        created = kube.custom.replace_cluster_custom_object_status(GROUP, VERSION, PLURAL, name, created)
    return created


def get_job(kube: Kube, name: str) -> dict[str, Any]:
    found: dict[str, Any] = kube.custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, name)
    return found


def job_when(
    kube: Kube, name: str, predicate: Callable[[dict[str, Any]], bool], within: float = 30.0
) -> dict[str, Any]:
    """Follow the job's watch until `predicate(job)` holds."""
    state = watch_until(
        kube.custom.list_cluster_custom_object,
        lambda st: predicate(st[f"/{name}"]),
        within,
        group=GROUP,
        version=VERSION,
        plural=PLURAL,
        field_selector=f"metadata.name={name}",
    )
    job: dict[str, Any] = state[f"/{name}"]
    return job


async def until_job(
    kube: Kube, name: str, predicate: Callable[[dict[str, Any]], bool], within: float = 30.0
) -> dict[str, Any]:
    """`job_when`, in a thread: the services run on this loop."""
    return await asyncio.to_thread(job_when, kube, name, predicate, within)


async def until_executors_idle(config: PodherdConfig, within: float = 60.0) -> None:
    """Until the executors' consumer holds no command, delivered or not. An eviction a budget refused is
    retried until its job ends and then acknowledged unacted: once idle, none of an ended job can come."""
    nc = await nats.connect(nats_servers(config.nats.url))
    stream = bus.Subjects(config.nats.subject_prefix).jobs_stream
    try:

        async def idle() -> bool:
            info = await nc.jetstream().consumer_info(stream, EXECUTOR_CONSUMER)
            return not info.num_pending and not info.num_ack_pending

        # Read again: JetStream tells no one that a consumer emptied.
        await until(idle, within=within, what="the executors' consumer idle", every=0.1)
    finally:
        await nc.close()


def ended(job: dict[str, Any]) -> bool:
    return (job.get("status") or {}).get("phase") in TERMINAL


def conditions(job: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {
        c["type"]: (c["status"], c.get("reason") or "")
        for c in (job.get("status") or {}).get("conditions") or []
    }


async def audit_order(nats_url: str, subjects: bus.Subjects) -> list[AuditRecord]:
    """Every audit record so far, in the stream's order."""
    nc = await nats.connect(nats_servers(nats_url))
    try:
        js = nc.jetstream()
        info = await js.stream_info(subjects.audit_stream)
        sub = await js.subscribe(subjects.all_audit, ordered_consumer=True)
        return [
            codec.decode((await sub.next_msg(timeout=10)).data, AuditRecord)
            for _ in range(info.state.messages)
        ]
    finally:
        await nc.close()
