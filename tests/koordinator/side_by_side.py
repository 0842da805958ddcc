"""One controller over the whole corpus, on a real engine of its own: each scenario in a namespace and on
nodes of its own, the controller started with the scenario's args, its jobs made, and each job's end (or
where it stands when the scenario's time is up) recorded."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import nats

from kubesim.sim import SimHandle
from podherd.harness.servers import Server
from podherd.realcluster import engine
from podherd.realcluster.koordinator import KoordinatorController
from tests.conformance.conftest import Scoped, _clean
from tests.conformance.engines import scoped
from tests.e2e.pipeline import GROUP, TERMINAL, VERSION, pipeline, pipeline_config
from tests.koordinator.scenarios import Ask, Scenario
from tests.kube import client_for

WITHIN = 90.0  # seconds a scenario's jobs may take to end
Outcome = tuple[str, str]  # (phase, reason)
Controller = Callable[[SimHandle, Scenario], contextlib.AbstractAsyncContextManager[None]]


def koordinator(work: Path) -> Controller:
    @contextlib.asynccontextmanager
    async def running(handle: SimHandle, scenario: Scenario) -> AsyncIterator[None]:
        controller = KoordinatorController(handle, work / scenario.name, dict(scenario.args))
        await asyncio.to_thread(controller.start)
        try:
            yield
        finally:
            await asyncio.to_thread(controller.stop)

    return running


def podherd(nats_srv: Server, redis_srv: Server) -> Controller:
    @contextlib.asynccontextmanager
    async def running(handle: SimHandle, scenario: Scenario) -> AsyncIterator[None]:
        # Koordinator's defaults (pipeline_config opens the rate and the object limiters for other tests),
        # then the scenario's args, as koord-descheduler is given them.
        koordinators = {"evictQPS": 10, "evictBurst": 1, "objectLimiters": {}}
        prefix = f"kd{int(time.time() * 1000) % 10**9}{scenario.name[:8]}".replace("-", "")
        config = pipeline_config(handle, nats_srv, redis_srv, prefix, **{**koordinators, **scenario.args})
        try:
            async with pipeline(config):
                yield
        finally:
            await _drop_streams(nats_srv.url, prefix)

    return running


async def _drop_streams(url: str, prefix: str) -> None:
    """The scenario's streams and buckets: the session's NATS server holds the whole corpus's otherwise."""
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        for info in await js.streams_info():
            name = info.config.name or ""
            if name.startswith((f"{prefix.upper()}_", f"KV_{prefix.upper()}_")):
                await js.delete_stream(name)
    finally:
        await nc.close()


def run_all(
    corpus: tuple[Scenario, ...], controller: Controller, work: Path
) -> dict[str, dict[str, Outcome]]:
    """Every scenario through `controller` on one real engine; each job's outcome by scenario."""
    handle = engine.start(work=work / "engine")
    try:
        outcomes = {}
        for scenario in corpus:
            outcomes[scenario.name] = asyncio.run(_one(handle, scenario, controller))
            print(f"{work.name} {scenario.name}: {outcomes[scenario.name]}", flush=True)
        return outcomes
    finally:
        handle.stop()


async def _one(handle: SimHandle, scenario: Scenario, controller: Controller) -> dict[str, Outcome]:
    engine.load(handle, scoped(scenario.document, scenario.name))
    c = Scoped(client_for(handle), scenario.name, "real")
    try:
        async with controller(handle, scenario):
            names = [_make(c, ask) for ask in scenario.jobs]
            return await asyncio.to_thread(_ends, c, names)
    finally:
        await asyncio.to_thread(_clean, c)
        c.kube.api.close()


def _make(c: Scoped, ask: Ask) -> str:
    if ask.pod is None:
        pods = c.kube.core.list_namespaced_pod(c.namespace, label_selector=f"app={ask.app}").items
        pod = sorted(p.metadata.name for p in pods)[ask.index]
    else:
        pod = ask.pod
    name = c.job_name(ask.name)
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PodMigrationJob",
        "metadata": {"name": name, "annotations": dict(ask.annotations)},
        "spec": {"podRef": {"kind": "Pod", "namespace": c.namespace, "name": pod}, **ask.spec},
    }
    c.kube.custom.create_cluster_custom_object(GROUP, VERSION, "podmigrationjobs", body)
    return name


def _ends(c: Scoped, names: list[str]) -> dict[str, Outcome]:
    """Each job's phase and reason once all have ended, or when the scenario's time is up."""
    deadline = time.monotonic() + WITHIN
    seen: dict[str, Outcome] = {}
    while True:
        for name in names:
            job = c.kube.custom.get_cluster_custom_object(GROUP, VERSION, "podmigrationjobs", name)
            status: dict[str, Any] = job.get("status") or {}
            seen[name.removeprefix(f"{c.scope}-")] = (status.get("phase") or "", status.get("reason") or "")
        if all(phase in TERMINAL for phase, _ in seen.values()) or time.monotonic() > deadline:
            return seen
        time.sleep(1.0)  # two controllers' status writes, read the same way: a poll, not a watch of one
