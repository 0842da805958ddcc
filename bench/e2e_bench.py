"""End to end: migrations through the four services as deployed (separate processes), real NATS and Redis.

    python -m bench.e2e_bench [--jobs 400] [--replicas 2] [--limits default|open] [--cluster sized|large]
                              [--rate JOBS_PER_SECOND] [--mode ReservationFirst|EvictDirectly]

For each mode, on a fresh cluster with room (kubesim in this process), `--jobs` PodMigrationJobs are created
at once (32 creates in flight, as many clients would send them; or `--rate` a second, to see a job's own
time without the queue of the others) and followed with a
watch until each ends: throughput (jobs per second, first create to last end), the latency from a job's
creation to its end (p50, p99), each service's peak memory (VmHWM), and the CPU the services spent per job
while the jobs ran (start-up aside). `ReservationFirst` is Podherd's way; `EvictDirectly` is the baseline
without Reservations, so the difference is what reserving first costs. Beside them: kubesim's own CPU per
job (its thread's), each service's API requests per job by verb and resource (as kubesim counted them by
user), where each job's time went, phase by phase, Podherd's or the cluster's (`bench.phases`, from
kubesim's event log), and the same jobs with this run's cluster times through a model of Koordinator's
controller (`bench.koordinator_model`: 3 s requeues, one worker, 500 ms arbitration; the jobs whose every
milestone the log shows). The cluster is sized to the jobs (40 nodes, Deployments of 30 pods) or `large`:
5,000 nodes and 100,000 pods, where every service also holds or reads through a cluster of production size.
Results: JSON on stdout and in bench/results/e2e.json.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from bench.koordinator_model import cluster_times, replay
from bench.phases import Change, milestones
from bench.phases import report as phase_report
from bench.results_io import emit
from bench.stack import deployment, nodes, stack
from bench.topology import Servers, start_servers
from kubesim.scenarios import generate
from kubesim.sim import Simulator
from podherd.harness.processes import SERVICES, ServiceProcesses
from shared.api.pmj import GROUP, PLURAL, TERMINAL_PHASES
from shared.kube.client import KubeClient

JOBS = f"/apis/{GROUP}/v1alpha1/{PLURAL}"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


PODS_PER_WORKLOAD = 30


def cluster(jobs: int, size: str = "sized") -> dict[str, Any]:
    if size == "large":
        return generate(5000, 100_000)
    workloads = max(20, -(-jobs // PODS_PER_WORKLOAD))
    return {
        "name": "e2e",
        "nodes": nodes(40, 16, "64Gi"),
        "workloads": [deployment(f"app-{i}", PODS_PER_WORKLOAD, "100m", "128Mi") for i in range(workloads)],
    }


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def pid_usage(pid: int) -> dict[str, float] | None:
    """Peak resident memory (MB) and CPU seconds of process `pid`, from /proc; None once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    hwm = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM")), 0)
    cpu = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    return {"peak_rss_mb": round(hwm / 1024, 1), "cpu_seconds": round(cpu, 2)}


def process_usage(processes: ServiceProcesses) -> dict[str, dict[str, float]]:
    """Peak resident memory (MB) and CPU seconds of each running service replica."""
    usage = {proc.name: pid_usage(proc.process.pid) for proc in processes.running}
    return {name: used for name, used in usage.items() if used is not None}


def cpu_per_job(
    start: dict[str, dict[str, float]], end: dict[str, dict[str, float]], jobs: int
) -> dict[str, float]:
    """The CPU the services spent from the first job's creation to the last job's end, per job: in all and
    per service (its replicas together). Start-up (imports, connecting, the initial sync) is not in it."""
    spent: dict[str, float] = {}
    for name, usage in end.items():
        service = name.rsplit("-", 1)[0]
        used = usage["cpu_seconds"] - start.get(name, {}).get("cpu_seconds", 0.0)
        spent[service] = spent.get(service, 0.0) + used
    per_job = {service: round(seconds / jobs * 1000, 1) for service, seconds in sorted(spent.items())}
    return {"total": round(sum(spent.values()) / jobs * 1000, 1), **per_job}


def cluster_history(sim: Simulator) -> list[Change]:
    """The changes of pods, Reservations and jobs in kubesim's event log (read on its own thread)."""
    kinds = ("pods", "reservations", "podmigrationjobs")
    return [Change(e.at, e.type, e.rt.plural, e.obj) for e in sim.store.log.history if e.rt.plural in kinds]


Asked = dict[tuple[str, str, str], int]


def asked_so_far(sim: Simulator) -> Asked:
    return dict(sim.api.requests_by_verb)


def requests_per_job(before: Asked, after: Asked, jobs: int) -> dict[str, dict[str, float]]:
    """API requests each service made during the run (all its replicas), per job: in all and by verb and
    resource ("get pods")."""
    per_service: dict[str, dict[str, int]] = {}
    for (user, verb, resource), count in after.items():
        service = next((s for s in SERVICES if user.endswith(f"podherd-{s}")), None)
        if service is not None and count > before.get((user, verb, resource), 0):
            asked = per_service.setdefault(service, {})
            what = f"{verb} {resource}"
            asked[what] = asked.get(what, 0) + count - before.get((user, verb, resource), 0)
    return {
        service: {
            "total": round(sum(asked.values()) / jobs, 1),
            **{what: round(n / jobs, 2) for what, n in sorted(asked.items(), key=lambda kv: -kv[1])},
        }
        for service, asked in sorted(per_service.items())
    }


async def follow(
    kube: KubeClient,
    count: int,
    ended: dict[str, float],
    version: str,
    running: dict[str, float] | None = None,
    prefix: str = "",
) -> None:
    """Each end of a job named `prefix`…, as the watch tells it (and, into `running`, when it was first seen
    admitted). A watch
    the API server ends (on the real engine one ended before a thousand jobs did: `410 Gone` past its watch
    cache's window, or its request timeout) is followed by a list and a new watch; a job the list shows
    ended is counted then."""
    while len(ended) < count:
        query = [("watch", "true"), ("resourceVersion", version), ("allowWatchBookmarks", "true")]
        async for line in kube.stream(JOBS, query, read_timeout=600):
            event = msgspec.json.decode(line)
            obj = event.get("object") or {}
            if event.get("type") == "ERROR":
                break
            version = (obj.get("metadata") or {}).get("resourceVersion") or version
            name = (obj.get("metadata") or {}).get("name")
            name = name if name and name.startswith(prefix) else None
            phase = (obj.get("status") or {}).get("phase")
            if name and running is not None and phase and phase != "Pending":
                running.setdefault(name, time.monotonic())
            if name and phase in TERMINAL_PHASES:
                ended.setdefault(name, time.monotonic())
                if len(ended) >= count:
                    return
        listing = msgspec.json.decode(await kube.arequest("GET", JOBS))
        for job in listing.get("items") or []:
            mine = job["metadata"]["name"].startswith(prefix)
            if mine and (job.get("status") or {}).get("phase") in TERMINAL_PHASES:
                ended.setdefault(job["metadata"]["name"], time.monotonic())
        version = listing["metadata"]["resourceVersion"]


# "All at once": the creates are sent side by side, as many clients would, not one after another.
CREATES_AT_ONCE = 32
# Limits as a careful operator sets them, or open: every limit above the job count and rate (the
# migration path's own speed, with nothing held back).
LIMITS: dict[str, dict[str, Any]] = {
    "default": {"maxMigratingPerNode": 4, "maxMigratingPerWorkload": 10, "maxUnavailablePerWorkload": 10},
    # One migration at a time per workload: no two replacements of one workload ever meet in the scheduler.
    "serial": {"maxMigratingPerNode": 4, "maxMigratingPerWorkload": 1, "maxUnavailablePerWorkload": 1},
    "open": {
        "maxMigratingPerNode": 10**6,
        "maxMigratingPerWorkload": "100%",
        "maxUnavailablePerWorkload": "100%",
        "skipCheckExpectedReplicas": True,
    },
}


MODES = ("ReservationFirst", "EvictDirectly")


@dataclass(frozen=True)
class Run:
    jobs: int
    replicas: int
    limits: str = "default"
    cluster: str = "sized"
    rate: float = 0.0  # jobs created per second; 0: all at once
    modes: tuple[str, ...] = MODES
    engine: str = "kubesim"  # or "real": the control plane `make controlplane` builds


async def run_mode(mode: str, run: Run, servers: Servers, work: Path) -> dict[str, Any]:
    prefix = f"e2e{mode[0].lower()}"
    jobs, replicas = run.jobs, run.replicas
    async with stack(
        cluster(jobs, run.cluster), servers, prefix, replicas, "5m", work, run.engine, **LIMITS[run.limits]
    ) as parts:
        handle, kube, processes, _ = parts
        kubesim = handle.sim is not None  # its event log and request counts; the real engine has neither
        asked_before = handle.call(asked_so_far) if kubesim else {}
        sim_cpu_before = handle.cpu_seconds()
        at_start = process_usage(processes)  # started and ready: what follows is the jobs' cost
        pods = msgspec.json.decode(await kube.arequest("GET", "/api/v1/pods"))["items"]
        version = msgspec.json.decode(await kube.arequest("GET", JOBS))["metadata"]["resourceVersion"]
        ended: dict[str, float] = {}
        watching = asyncio.create_task(follow(kube, jobs, ended, version))
        created: dict[str, float] = {}
        start = time.monotonic()
        creating = asyncio.Semaphore(1 if run.rate else CREATES_AT_ONCE)

        async def create(i: int, pod: dict[str, Any]) -> None:
            name, meta = f"{prefix}-{i}", pod["metadata"]
            body = {
                "apiVersion": f"{GROUP}/v1alpha1",
                "kind": "PodMigrationJob",
                "metadata": {"name": name},
                "spec": {"podRef": {"namespace": meta["namespace"], "name": meta["name"]}, "mode": mode},
            }
            if run.rate:  # paced: each job created at its time, so none queues behind the others
                await asyncio.sleep(max(0.0, start + i / run.rate - time.monotonic()))
            async with creating:
                created[name] = time.monotonic()
                await kube.arequest("POST", JOBS, body=body)

        await asyncio.gather(*(create(i, pod) for i, pod in enumerate(pods[:jobs])))
        submitted = time.monotonic() - start
        async with asyncio.timeout(600):
            await watching
        makespan = max(ended.values()) - start
        final = msgspec.json.decode(await kube.arequest("GET", JOBS))["items"]
        phases: dict[str, int] = {}
        for job in final:
            phase = (job.get("status") or {}).get("phase") or "Pending"
            phases[phase] = phases.get(phase, 0) + 1
        latencies = [ended[n] - created[n] for n in created if n in ended]
        usage = process_usage(processes)
        asked = handle.call(asked_so_far) if kubesim else {}
        sim_cpu = handle.cpu_seconds()
        history = handle.call(cluster_history) if kubesim else []
    cluster_cpu = (
        round((sim_cpu - sim_cpu_before) / jobs * 1000, 1)
        if sim_cpu is not None and sim_cpu_before is not None
        else None
    )
    return {
        "mode": mode,
        "engine": run.engine,
        "limits": run.limits,
        "cluster": run.cluster,
        "rate": run.rate or "all at once",
        "jobs": jobs,
        "replicas_per_service": replicas,
        "phases": phases,
        "create_seconds": round(submitted, 2),
        "makespan_seconds": round(makespan, 2),
        "jobs_per_second": round(jobs / makespan, 1),
        "latency_s_p50": round(percentile(latencies, 0.5), 2),
        "latency_s_p99": round(percentile(latencies, 0.99), 2),
        "services": usage,
        "peak_rss_mb_max": max((u["peak_rss_mb"] for u in usage.values()), default=0),
        "cpu_seconds_total": round(sum(u["cpu_seconds"] for u in usage.values()), 1),
        "service_cpu_ms_per_job": cpu_per_job(at_start, usage, jobs),
        # kubesim's thread, or every component of the real control plane (etcd to kwok)
        "kubesim_cpu_ms_per_job" if kubesim else "control_plane_cpu_ms_per_job": cluster_cpu,
        "api_requests_per_job": requests_per_job(asked_before, asked, jobs) if kubesim else None,
        "time_per_job": phase_report(history) if kubesim else None,
        # The same jobs with the cluster's times of this run, through Koordinator's controller (a model).
        "koordinator_model": replay(cluster_times(milestones(history).values())) if kubesim else None,
    }


async def main_async(run: Run) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="podherd-e2e-"))
    servers = start_servers("single", work)
    try:
        modes = [await run_mode(m, run, servers, work) for m in run.modes]
    finally:
        servers.stop()
        shutil.rmtree(work, ignore_errors=True)
    return {"modes": modes}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=400)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--limits", choices=sorted(LIMITS), default="default")
    parser.add_argument("--cluster", choices=("sized", "large"), default="sized")
    parser.add_argument("--rate", type=float, default=0.0, help="jobs created per second (0: all at once)")
    parser.add_argument(
        "--mode", choices=MODES, action="append", help="one mode only (to profile it alone); default: both"
    )
    parser.add_argument("--engine", choices=("kubesim", "real"), default="kubesim")
    args = parser.parse_args()
    modes = tuple(args.mode or MODES)
    run = Run(args.jobs, args.replicas, args.limits, args.cluster, args.rate, modes, args.engine)
    emit("e2e", asyncio.run(main_async(run)))


if __name__ == "__main__":
    main()
