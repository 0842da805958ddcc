"""Podherd beside Koordinator's own migration controller, on the same real-engine cluster, one at a time.

    python -m bench.side_by_side [--jobs 100 1000] [--limits default open] [--pending 1000 10000]
                                 [--rate 2] [--arrivals 60] [--controllers koordinator podherd]

The real engine (etcd, kube-apiserver, kube-controller-manager, koord-scheduler and kwok, built from Go
modules by `make controlplane`) is started fresh for each run, with the same cluster shape, and one
controller beside it: koord-descheduler v1.8.0 running MigrationController alone, or Podherd's four services
(one replica each) with their nats-server and redis-server. Both read the same MigrationControllerArgs.
The controllers alternate run by run, so a change in this machine's speed falls on both.

- **jobs**: N ReservationFirst PMJs created at once (32 creates in flight) for N pods of Deployments of 30
  on 40 nodes: makespan (first create to last end), jobs/s, job latency (created -> ended) and admission
  latency (created -> first seen Running) p50/p99, every job's phase and reason.
- **pending**: P jobs wait behind a node whose migration slot is held (maxMigratingPerNode 1, the holder's
  Reservation fits nowhere), then jobs for pods elsewhere arrive at a fixed rate: their admission latency.
- For both: CPU per job of the controller's processes and of the control plane (from /proc, start-up
  aside), and the controller's peak memory (VmHWM).

`default` limits are Koordinator's evictQPS 10 / burst 1 over a careful operator's per-node and
per-workload limits (4 per node, 10 of 30 per workload, no object limiter: Koordinator's own workload
limiter, 3 of 30 per 5 minutes, would end most of 1,000 jobs at their ttl on both); `open` lifts every limit.
Without Go (no control plane to build) it says so in one line and exits 2.
Results: JSON on stdout and in bench/results/side-by-side.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from bench.e2e_bench import CREATES_AT_ONCE, JOBS, cluster, follow, percentile, pid_usage
from bench.results_io import RESULTS, emit
from bench.stack import deployment, nodes, stack
from bench.topology import Single, start_servers
from kubesim.sim import SimHandle
from podherd.realcluster import build
from podherd.realcluster import engine as real_engine
from podherd.realcluster.koordinator import KoordinatorController
from shared.api.pmj import GROUP
from shared.config.model import KubernetesConfig
from shared.kube.client import KubeClient

# Each job's ttl, written on it: Koordinator applies its defaultJobTTL only to the jobs its own plugins make,
# and a job a user made without one waits for ever.
TTL = "5m"
WITHIN = 900.0  # seconds a run's jobs may take to end
PARTIAL = RESULTS / "side-by-side.partial.json"
IDLE_SAMPLE = 5.0  # seconds the control plane is watched at rest before a run's jobs
OFF = {"workload": {"duration": "0s"}}  # no object limiter
LIMITS: dict[str, dict[str, Any]] = {
    "default": {
        "evictQPS": 10,
        "evictBurst": 1,
        "maxMigratingPerNode": 4,
        "maxMigratingPerWorkload": 10,
        "maxUnavailablePerWorkload": 10,
        "objectLimiters": OFF,
    },
    "open": {
        "evictQPS": 100_000,
        "evictBurst": 100_000,
        "maxMigratingPerNode": 1_000_000,
        "maxMigratingPerWorkload": "100%",
        "maxUnavailablePerWorkload": "100%",
        "skipCheckExpectedReplicas": True,
        "objectLimiters": OFF,
    },
}
CONTROLLERS = ("koordinator", "podherd")


@dataclass
class Beside:
    """A cluster and one controller running beside it; `pids` names the controller's own processes."""

    handle: SimHandle
    kube: KubeClient
    pids: Callable[[], dict[str, int]]


Controller = Callable[[dict[str, Any], dict[str, Any], Path], contextlib.AbstractAsyncContextManager[Beside]]


@contextlib.asynccontextmanager
async def koordinator(scenario: dict[str, Any], args: dict[str, Any], work: Path) -> AsyncIterator[Beside]:
    handle = await asyncio.to_thread(real_engine.start, scenario, work / "engine")
    controller = KoordinatorController(handle, work / "koord-descheduler", args)
    kube = KubeClient.from_config(KubernetesConfig(kubeconfig=str(handle.kubeconfig)))
    try:
        await asyncio.to_thread(controller.start)
        process = controller.process
        assert process is not None
        yield Beside(handle, kube, lambda: {"koord-descheduler": process.pid})
    finally:
        await kube.aclose()
        await asyncio.to_thread(controller.stop)
        handle.stop()


@contextlib.asynccontextmanager
async def podherd(scenario: dict[str, Any], args: dict[str, Any], work: Path) -> AsyncIterator[Beside]:
    servers = start_servers("single", work)
    assert isinstance(servers, Single)
    try:
        async with stack(scenario, servers, "sbs", 1, "5m", work, "real", **args) as parts:
            handle, kube, processes, _ = parts

            def pids() -> dict[str, int]:
                mine = {proc.name: proc.process.pid for proc in processes.running}
                for name, server in (("nats-server", servers.nats), ("redis-server", servers.redis)):
                    if server.pid is not None:
                        mine[name] = server.pid
                return mine

            yield Beside(handle, kube, pids)
    finally:
        servers.stop()


RUNNERS: dict[str, Controller] = {"koordinator": koordinator, "podherd": podherd}


def usage(beside: Beside) -> dict[str, dict[str, float]]:
    found = {name: pid_usage(pid) for name, pid in beside.pids().items()}
    return {name: used for name, used in found.items() if used is not None}


async def _create(kube: KubeClient, name: str, pod: dict[str, Any], **spec: Any) -> None:
    meta = pod["metadata"]
    body = {
        "apiVersion": f"{GROUP}/v1alpha1",
        "kind": "PodMigrationJob",
        "metadata": {"name": name},
        "spec": {"podRef": {"namespace": meta["namespace"], "name": meta["name"]}, **spec},
    }
    await kube.arequest("POST", JOBS, body=body)


async def _pods(kube: KubeClient, app: str | None = None) -> list[dict[str, Any]]:
    query = [("labelSelector", f"app={app}")] if app else []
    listing = msgspec.json.decode(await kube.arequest("GET", "/api/v1/namespaces/default/pods", query))
    return sorted(listing["items"], key=lambda p: p["metadata"]["name"])


@dataclass(frozen=True)
class Before:
    """The processes' usage as a run's jobs begin, and the control plane's CPU at rest (seconds a second)."""

    usage: dict[str, dict[str, float]]
    plane: float
    idle: float
    at: float


async def before_jobs(beside: Beside) -> Before:
    """Where the run starts from, after IDLE_SAMPLE seconds of the cluster at rest (kwok's leases, the
    controllers' resyncs): what the control plane spends without any job, taken off its CPU per job."""
    plane = beside.handle.cpu_seconds() or 0.0
    await asyncio.sleep(IDLE_SAMPLE)  # a measurement window, not a wait for something to happen
    now = beside.handle.cpu_seconds() or 0.0
    return Before(usage(beside), now, (now - plane) / IDLE_SAMPLE, time.monotonic())


def _summary(beside: Beside, before: Before, jobs: int) -> dict[str, Any]:
    after = usage(beside)
    spent = {n: after[n]["cpu_seconds"] - before.usage.get(n, {}).get("cpu_seconds", 0.0) for n in after}
    plane = (beside.handle.cpu_seconds() or 0.0) - before.plane
    busy = plane - before.idle * (time.monotonic() - before.at)
    return {
        "cpu_ms_per_job": round(sum(spent.values()) / jobs * 1000, 1),
        "cpu_ms_per_job_by_process": {n: round(s / jobs * 1000, 1) for n, s in sorted(spent.items())},
        "control_plane_cpu_ms_per_job": round(plane / jobs * 1000, 1),
        "control_plane_cpu_ms_per_job_over_idle": round(busy / jobs * 1000, 1),
        "peak_rss_mb": round(sum(u["peak_rss_mb"] for u in after.values()), 1),
        "peak_rss_mb_by_process": {n: u["peak_rss_mb"] for n, u in sorted(after.items())},
    }


async def _by_job(kube: KubeClient, names: set[str]) -> dict[str, str]:
    """Each job's phase and reason ("Failed/Timeout")."""
    ends = {}
    for job in msgspec.json.decode(await kube.arequest("GET", JOBS))["items"]:
        if job["metadata"]["name"] in names:
            status = job.get("status") or {}
            ends[job["metadata"]["name"]] = (
                f"{status.get('phase') or 'Pending'}/{status.get('reason') or ''}".rstrip("/")
            )
    return ends


async def _outcomes(kube: KubeClient, names: set[str]) -> dict[str, int]:
    counted: dict[str, int] = {}
    for end in (await _by_job(kube, names)).values():
        counted[end] = counted.get(end, 0) + 1
    return dict(sorted(counted.items()))


def _ms(values: list[float], q: float) -> float:
    return round(percentile(values, q) * 1000, 1)


async def jobs_at_once(beside: Beside, jobs: int) -> dict[str, Any]:
    kube = beside.kube
    pods = (await _pods(kube))[:jobs]
    before = await before_jobs(beside)
    version = msgspec.json.decode(await kube.arequest("GET", JOBS))["metadata"]["resourceVersion"]
    ended: dict[str, float] = {}
    admitted: dict[str, float] = {}
    watching = asyncio.create_task(follow(kube, len(pods), ended, version, admitted))
    created: dict[str, float] = {}
    creating = asyncio.Semaphore(CREATES_AT_ONCE)
    start = time.monotonic()

    async def create(i: int, pod: dict[str, Any]) -> None:
        async with creating:
            created[f"sbs-{i}"] = time.monotonic()
            await _create(kube, f"sbs-{i}", pod, mode="ReservationFirst", ttl=TTL)

    await asyncio.gather(*(create(i, pod) for i, pod in enumerate(pods)))
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(WITHIN):
            await watching
    watching.cancel()
    latency = [ended[n] - created[n] for n in created if n in ended]
    admission = [
        admitted.get(n, ended.get(n, 0.0)) - created[n] for n in created if n in admitted or n in ended
    ]
    makespan = (max(ended.values()) - start) if ended else WITHIN
    return {
        "jobs": len(pods),
        "ended": len(ended),
        "outcomes": await _outcomes(kube, set(created)),
        "by_job": await _by_job(kube, set(created)),
        "makespan_s": round(makespan, 1),
        "jobs_per_s": round(len(ended) / makespan, 2),
        "latency_s_p50": round(percentile(latency, 0.5), 1),
        "latency_s_p99": round(percentile(latency, 0.99), 1),
        "admission_ms_p50": _ms(admission, 0.5),
        "admission_ms_p99": _ms(admission, 0.99),
        **_summary(beside, before, len(pods)),
    }


def pending_cluster(backlog: int, movers: int) -> dict[str, Any]:
    """A node full of pods whose jobs must wait (its one migration slot held by a job whose Reservation fits
    nowhere), and 50 nodes of movable pods."""
    hold = deployment("hold", 1, "60", "1Gi") | {"placement": ["full-1"]}
    waiting = deployment("waiting", backlog, "1m", "1Mi") | {"placement": ["full-1"] * backlog}
    movable = [deployment(f"move-{i}", 30, "100m", "128Mi") for i in range(-(-movers // 30))]
    full = {"name": "full-{i}", "count": 1, "capacity": {"cpu": "100", "memory": "256Gi", "pods": "20000"}}
    return {
        "name": "pending",
        "nodes": [full, *nodes(50, 16, "64Gi")],
        "workloads": [hold, waiting, *movable],
    }


ARRIVAL = "sbs-arrival-"  # the jobs whose admission the pending run measures
PENDING_LIMITS = {**LIMITS["open"], "maxMigratingPerNode": 1}


async def pending(beside: Beside, backlog: int, rate: float, arrivals: int) -> dict[str, Any]:
    kube = beside.kube
    holder = (await _pods(kube, "hold"))[0]
    await _create(kube, "sbs-hold", holder, mode="ReservationFirst", ttl="1h")
    await _until_running(kube, "sbs-hold")
    creating = asyncio.Semaphore(CREATES_AT_ONCE)

    async def wait_behind(i: int, pod: dict[str, Any]) -> None:
        async with creating:
            await _create(kube, f"sbs-wait-{i}", pod, mode="ReservationFirst", ttl="1h")

    await asyncio.gather(*(wait_behind(i, p) for i, p in enumerate(await _pods(kube, "waiting"))))
    movers = [p for p in await _pods(kube) if p["metadata"]["name"].startswith("move-")]
    by_node: dict[str, list[dict[str, Any]]] = {}
    for pod in movers:
        by_node.setdefault(pod["spec"].get("nodeName", ""), []).append(pod)
    spread = [pods[i] for i in range(30) for pods in by_node.values() if i < len(pods)][:arrivals]
    version = msgspec.json.decode(await kube.arequest("GET", JOBS))["metadata"]["resourceVersion"]
    ended: dict[str, float] = {}
    admitted: dict[str, float] = {}
    before = await before_jobs(beside)
    watching = asyncio.create_task(follow(kube, len(spread), ended, version, admitted, ARRIVAL))
    created: dict[str, float] = {}
    start = time.monotonic()
    for i, pod in enumerate(spread):  # one node after another: no arrival waits behind another's node
        await asyncio.sleep(max(0.0, start + i / rate - time.monotonic()))
        created[f"{ARRIVAL}{i}"] = time.monotonic()
        await _create(kube, f"{ARRIVAL}{i}", pod, mode="ReservationFirst", ttl=TTL)
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(WITHIN):
            await watching  # each arrival moved to its end, and when it was admitted seen on the way
    watching.cancel()
    # An arrival never admitted within the run counts as admitted at its end: a floor, said beside it.
    seen = {**ended, **admitted}
    admission = [seen.get(n, time.monotonic()) - created[n] for n in created]
    return {
        "pending": backlog,
        "arrivals": len(created),
        "arrivals_not_admitted_within_the_run": len([n for n in created if n not in seen]),
        "rate_per_s": rate,
        "admission_ms_p50": _ms(admission, 0.5),
        "admission_ms_p99": _ms(admission, 0.99),
        "waiting_outcomes": await _outcomes(kube, {f"sbs-wait-{i}" for i in range(backlog)}),
        **_summary(beside, before, len(created)),
    }


async def _until_running(kube: KubeClient, name: str) -> None:
    query = [("watch", "true"), ("fieldSelector", f"metadata.name={name}")]
    async with asyncio.timeout(120):
        async for line in kube.stream(JOBS, query, read_timeout=120):
            job = msgspec.json.decode(line).get("object") or {}
            if (job.get("status") or {}).get("phase") == "Running":
                return


async def one(
    controller: str, what: str, size: int, options: argparse.Namespace, work: Path
) -> dict[str, Any]:
    runner = RUNNERS[controller]
    place = work / f"{controller}-{what}-{size}"
    if what == "pending":
        async with runner(pending_cluster(size, options.arrivals), PENDING_LIMITS, place) as beside:
            result = await pending(beside, size, options.rate, options.arrivals)
    else:
        async with runner(cluster(size), LIMITS[what], place) as beside:
            result = await jobs_at_once(beside, size)
    return {"controller": controller, "run": what, **result}


def table(result: dict[str, Any]) -> list[str]:
    """The runs as Markdown rows, each run's two controllers one after the other."""
    head = [
        "run",
        "controller",
        "jobs",
        "outcomes",
        "makespan s",
        "jobs/s",
        "latency p50 / p99 s",
        "admission p50 / p99 ms",
        "CPU ms/job",
        "control plane CPU ms/job (over idle)",
        "peak MB",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in result["runs"]:
        size = r.get("jobs", r.get("pending"))
        pending = r["run"] == "pending"
        cells = [
            f"{r['run']} {size:,}" + (f" (+{r['arrivals']} at {r['rate_per_s']:g}/s)" if pending else ""),
            r["controller"],
            r["arrivals"] if pending else r["jobs"],
            _ends(r),
            r.get("makespan_s", "-"),
            r.get("jobs_per_s", "-"),
            f"{r['latency_s_p50']} / {r['latency_s_p99']}" if "latency_s_p50" in r else "-",
            f"{r['admission_ms_p50']:,} / {r['admission_ms_p99']:,}",
            r["cpu_ms_per_job"],
            f"{r['control_plane_cpu_ms_per_job']} ({r['control_plane_cpu_ms_per_job_over_idle']})",
            r["peak_rss_mb"],
        ]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return lines


def _ends(run: dict[str, Any]) -> str:
    """How the run's jobs ended; for a pending run, the jobs left waiting."""
    if run["run"] == "pending":
        return "waiting: " + ", ".join(f"{k} {v}" for k, v in run.get("waiting_outcomes", {}).items())
    return ", ".join(f"{k} {v}" for k, v in run.get("outcomes", {}).items()) or "-"


def plan(options: argparse.Namespace) -> list[tuple[str, int]]:
    runs = [(limits, jobs) for jobs in options.jobs for limits in options.limits]
    return runs + [("pending", backlog) for backlog in options.pending]


async def main_async(options: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="podherd-side-by-side-"))
    rows = []
    try:
        for i, (what, size) in enumerate(plan(options)):
            order = options.controllers if i % 2 == 0 else options.controllers[::-1]
            for controller in order:
                print(f"side by side: {controller} {what} {size}", file=sys.stderr, flush=True)
                rows.append(await one(controller, what, size, options, work))
                # So far, kept after every run: a long run stopped midway keeps what it measured.
                PARTIAL.parent.mkdir(exist_ok=True)
                PARTIAL.write_text(json.dumps(result(rows), indent=2) + "\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return result(rows)


def result(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "date": datetime.now(UTC).date().isoformat(),
        "cluster": "40 nodes x 16 CPU, Deployments of 30",
        "runs": rows,
        "outcomes_compared": compare(rows),
    }


def compare(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per run, job by job (the same pod, by position, on each cluster): how many ended the same, and how
    many Koordinator's controller brought to Succeeded that Podherd did not."""
    out = []
    for theirs in (r for r in rows if r["controller"] == "koordinator" and "by_job" in r):
        ours = next(
            (
                r
                for r in rows
                if r["controller"] == "podherd" and (r["run"], r["jobs"]) == (theirs["run"], theirs["jobs"])
            ),
            None,
        )
        if ours is None:  # its Podherd run is still to come
            continue
        pairs = [(end, ours["by_job"].get(name)) for name, end in theirs["by_job"].items()]
        out.append(
            {
                "run": f"{theirs['run']} {theirs['jobs']}",
                "jobs": len(pairs),
                "same": sum(1 for k, p in pairs if k == p),
                "koordinator_succeeded_podherd_not": sum(1 for k, p in pairs if k == "Succeeded" and p != k),
                "podherd_succeeded_koordinator_not": sum(1 for k, p in pairs if p == "Succeeded" and p != k),
            }
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, nargs="*", default=[100, 1000])
    parser.add_argument("--limits", nargs="*", choices=sorted(LIMITS), default=["default", "open"])
    parser.add_argument("--pending", type=int, nargs="*", default=[1000, 10000])
    parser.add_argument("--rate", type=float, default=2.0, help="arrivals a second behind the pending jobs")
    parser.add_argument("--arrivals", type=int, default=60)
    parser.add_argument("--controllers", nargs="*", choices=CONTROLLERS, default=list(CONTROLLERS))
    options = parser.parse_args()
    try:
        build.built()
    except build.ControlPlaneUnavailable as why:
        print(
            f"bench.side_by_side needs the real engine, and it cannot be built here: {why}", file=sys.stderr
        )
        sys.exit(2)
    # SIGTERM unwinds as an exit does: each run's controller and control plane are stopped, none left behind.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    emit("side-by-side", asyncio.run(main_async(options)))


if __name__ == "__main__":
    main()
