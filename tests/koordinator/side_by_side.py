"""One controller over the whole corpus, on a real engine of its own. Scenarios that run with the same args
share one start of the controller and run side by side, each in a namespace and on nodes of its own; each
job's trace (its end, its conditions in order, its pod's eviction, its Reservation's fate) and each
scenario's most jobs migrating at once, per node, namespace and workload, are read from watch events."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nats

from kubesim.sim import SimHandle
from podherd.harness.servers import Server
from podherd.realcluster import engine
from podherd.realcluster.koordinator import KoordinatorController
from shared.config.model import KubernetesConfig
from shared.kube.client import KubeClient
from tests.conformance.conftest import Scoped, _clean
from tests.conformance.engines import scoped
from tests.e2e.pipeline import GROUP, VERSION, pipeline, pipeline_config
from tests.koordinator.scenarios import Ask, Scenario
from tests.koordinator.trace import SETTLE_WITHIN, JobTrace, Recorder, namespace_of, node_of, workload_of
from tests.kube import client_for

WITHIN = 90.0  # seconds a scenario's jobs may take to end
KEYS = {"node": node_of, "namespace": namespace_of, "workload": workload_of}
Controller = Callable[[SimHandle, dict[str, Any], str], contextlib.AbstractAsyncContextManager[None]]


@dataclass(frozen=True)
class Run:
    jobs: dict[str, JobTrace]
    concurrency: dict[str, dict[str, int]]  # node / namespace / workload -> the most migrating at once


def koordinator(work: Path) -> Controller:
    @contextlib.asynccontextmanager
    async def running(handle: SimHandle, args: dict[str, Any], label: str) -> AsyncIterator[None]:
        controller = KoordinatorController(handle, work / label, dict(args))
        await asyncio.to_thread(controller.start)
        try:
            yield
        finally:
            await asyncio.to_thread(controller.stop)

    return running


def podherd(nats_srv: Server, redis_srv: Server) -> Controller:
    @contextlib.asynccontextmanager
    async def running(handle: SimHandle, args: dict[str, Any], label: str) -> AsyncIterator[None]:
        # Koordinator's defaults (pipeline_config opens the rate and the object limiters for other tests),
        # then the scenario's args, as koord-descheduler is given them.
        koordinators = {"evictQPS": 10, "evictBurst": 1, "objectLimiters": {}}
        prefix = f"kd{int(time.time() * 1000) % 10**9}{label[:8]}".replace("-", "")
        config = pipeline_config(handle, nats_srv, redis_srv, prefix, **{**koordinators, **args})
        try:
            async with pipeline(config):
                yield
        finally:
            await _drop_streams(nats_srv.url, prefix)

    return running


async def _drop_streams(url: str, prefix: str) -> None:
    """The group's streams and buckets: the session's NATS server holds the whole corpus's otherwise."""
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        for info in await js.streams_info():
            name = info.config.name or ""
            if name.startswith((f"{prefix.upper()}_", f"KV_{prefix.upper()}_")):
                await js.delete_stream(name)
    finally:
        await nc.close()


def groups(corpus: tuple[Scenario, ...]) -> list[list[Scenario]]:
    """The corpus by args, in the corpus's order."""
    by_args: dict[str, list[Scenario]] = {}
    for scenario in corpus:
        by_args.setdefault(json.dumps(scenario.args, sort_keys=True), []).append(scenario)
    return list(by_args.values())


def merged(group: list[Scenario]) -> dict[str, Any]:
    """One document holding every scenario of `group`, each scoped to its namespace and nodes."""
    out: dict[str, Any] = {}
    for scenario in group:
        for key, value in scoped(scenario.document, scenario.name).items():
            if isinstance(value, list):
                out.setdefault(key, []).extend(value)
    return out


def run_all(corpus: tuple[Scenario, ...], controller: Controller, work: Path) -> dict[str, Run]:
    """Every scenario through `controller` on one real engine of its own."""
    handle = engine.start(work=work / "engine")
    try:
        runs: dict[str, Run] = {}
        for i, group in enumerate(groups(corpus)):
            engine.load(handle, merged(group))
            runs.update(asyncio.run(_group(handle, group, controller, f"group-{i}")))
            for scenario in group:
                print(f"{work.name} {scenario.name}: {runs[scenario.name].jobs}", flush=True)
        return runs
    finally:
        handle.stop()


async def _group(
    handle: SimHandle, group: list[Scenario], controller: Controller, label: str
) -> dict[str, Run]:
    try:
        async with controller(handle, group[0].args, label):
            done = await asyncio.gather(*(_one(handle, scenario) for scenario in group))
    finally:
        # Once the whole group is over: a scenario's cleanup takes the namespaces its name begins (for
        # `a-bare-pod`, the `a-bare-pod-…` ones), which may be another scenario of the group still running.
        kube = client_for(handle)
        try:
            for scenario in group:
                await asyncio.to_thread(_clean, Scoped(kube, scenario.name, "real"))
        finally:
            kube.api.close()
    return {scenario.name: run for scenario, run in zip(group, done, strict=True)}


async def _one(handle: SimHandle, scenario: Scenario) -> Run:
    kube = KubeClient.from_config(KubernetesConfig(kubeconfig=str(handle.kubeconfig)))
    c = Scoped(client_for(handle), scenario.name, "real")
    recorder = Recorder(kube, scenario.name)
    await recorder.start()
    try:
        names = [await asyncio.to_thread(_make, c, ask) for ask in scenario.jobs]
        await recorder.until(lambda r: r.ended(names), WITHIN)
        await recorder.until(lambda r: r.settled(names), SETTLE_WITHIN)
        return Run(
            jobs={name.removeprefix(f"{c.scope}-"): recorder.trace(name) for name in names},
            concurrency={kind: recorder.concurrency(names, key) for kind, key in KEYS.items()},
        )
    finally:
        await recorder.stop()
        c.kube.api.close()
        await kube.aclose()


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
