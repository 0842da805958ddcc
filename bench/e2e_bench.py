"""End to end: migrations through the four services as deployed (separate processes), real NATS and Redis.

    python -m bench.e2e_bench [--jobs 400] [--replicas 2] [--limits default|open]

For each mode, on a fresh cluster with room (kubesim in this process), `--jobs` PodMigrationJobs are created
at once and followed with a watch until each ends: throughput (jobs per second, first create to last end), the
latency from a job's creation to its end (p50, p99), and each service's peak memory (VmHWM) and CPU time.
`ReservationFirst` is Podherd's way; `EvictDirectly` is the baseline without Reservations, so the difference
is what reserving first costs. Beside them: kubesim's own CPU per job (its thread's), each service's API
requests per job (as kubesim counted them by user), where each job's time went, phase by phase, Podherd's or
the cluster's (`bench.phases`, from kubesim's event log), and the same jobs with this run's cluster times
through a model of Koordinator's controller (`bench.koordinator_model`: 3 s requeues, one worker, 500 ms
arbitration; the jobs whose every milestone the log shows). Results: JSON on stdout and in
bench/results/e2e.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec

from bench.koordinator_model import cluster_times, replay
from bench.phases import Change, milestones
from bench.phases import report as phase_report
from bench.results_io import emit
from bench.stack import deployment, nodes, stack
from kubesim.sim import Simulator
from podherd.processes import SERVICES, ServiceProcesses
from podherd.servers import Server, nats_server, redis_server
from shared.api.pmj import GROUP, PLURAL, TERMINAL_PHASES
from shared.kube import KubeClient

JOBS = f"/apis/{GROUP}/v1alpha1/{PLURAL}"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


PODS_PER_WORKLOAD = 30


def cluster(workloads: int = 20, pods: int = PODS_PER_WORKLOAD) -> dict[str, Any]:
    return {
        "name": "e2e",
        "nodes": nodes(40, 16, "64Gi"),
        "workloads": [deployment(f"app-{i}", pods, "100m", "128Mi") for i in range(workloads)],
    }


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def process_usage(processes: ServiceProcesses) -> dict[str, dict[str, float]]:
    """Peak resident memory (MB) and CPU seconds of each running service replica, from /proc."""
    out: dict[str, dict[str, float]] = {}
    for proc in processes.running:
        with contextlib.suppress(OSError):
            status = Path(f"/proc/{proc.process.pid}/status").read_text()
            hwm = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM"))
            fields = Path(f"/proc/{proc.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
            cpu = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
            out[proc.name] = {"peak_rss_mb": round(hwm / 1024, 1), "cpu_seconds": round(cpu, 2)}
    return out


def cluster_history(sim: Simulator) -> list[Change]:
    """The changes of pods, Reservations and jobs in kubesim's event log (read on its own thread)."""
    kinds = ("pods", "reservations", "podmigrationjobs")
    return [Change(e.at, e.type, e.rt.plural, e.obj) for e in sim.store.log.history if e.rt.plural in kinds]


def requests_per_job(before: dict[str, int], after: dict[str, int], jobs: int) -> dict[str, float]:
    """API requests each service made during the run (all its replicas), per job."""
    per_service: dict[str, int] = {}
    for user, count in after.items():
        service = next((s for s in SERVICES if user.endswith(f"podherd-{s}")), None)
        if service is not None:
            per_service[service] = per_service.get(service, 0) + count - before.get(user, 0)
    return {service: round(count / jobs, 1) for service, count in sorted(per_service.items())}


async def follow(kube: KubeClient, count: int, ended: dict[str, float], version: str) -> None:
    query = [("watch", "true"), ("resourceVersion", version)]
    async for line in kube.stream(JOBS, query, read_timeout=600):
        obj = msgspec.json.decode(line).get("object") or {}
        name = (obj.get("metadata") or {}).get("name")
        if name and (obj.get("status") or {}).get("phase") in TERMINAL_PHASES:
            ended.setdefault(name, time.monotonic())
            if len(ended) >= count:
                return


# Limits as a careful operator sets them, or open: every limit above the job count and rate (the
# migration path's own speed, with nothing held back).
LIMITS: dict[str, dict[str, Any]] = {
    "default": {"maxMigratingPerNode": 4, "maxMigratingPerWorkload": 10, "maxUnavailablePerWorkload": 10},
    "open": {
        "maxMigratingPerNode": 10**6,
        "maxMigratingPerWorkload": "100%",
        "maxUnavailablePerWorkload": "100%",
        "skipCheckExpectedReplicas": True,
    },
}


async def run_mode(
    mode: str, jobs: int, replicas: int, servers: tuple[Server, Server], work: Path, limits: str = "default"
) -> dict[str, Any]:
    prefix = f"e2e{mode[0].lower()}"
    nats_srv, redis_srv = servers
    workloads = max(20, -(-jobs // PODS_PER_WORKLOAD))
    with stack(
        cluster(workloads), nats_srv, redis_srv, prefix, replicas, "5m", work, **LIMITS[limits]
    ) as parts:
        handle, kube, processes, _ = parts
        asked_before = handle.call(lambda sim: dict(sim.api.requests_by_user))
        sim_cpu_before = handle.cpu_seconds()
        pods = msgspec.json.decode(await kube.arequest("GET", "/api/v1/pods"))["items"]
        version = msgspec.json.decode(await kube.arequest("GET", JOBS))["metadata"]["resourceVersion"]
        ended: dict[str, float] = {}
        watching = asyncio.create_task(follow(kube, jobs, ended, version))
        created: dict[str, float] = {}
        start = time.monotonic()
        for i, pod in enumerate(pods[:jobs]):
            name = f"{prefix}-{i}"
            body = {
                "apiVersion": f"{GROUP}/v1alpha1",
                "kind": "PodMigrationJob",
                "metadata": {"name": name},
                "spec": {"podRef": {"namespace": "default", "name": pod["metadata"]["name"]}, "mode": mode},
            }
            created[name] = time.monotonic()
            await kube.arequest("POST", JOBS, body=body)
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
        asked = handle.call(lambda sim: dict(sim.api.requests_by_user))
        sim_cpu = handle.cpu_seconds()
        history = handle.call(cluster_history)
    return {
        "mode": mode,
        "limits": limits,
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
        "kubesim_cpu_ms_per_job": round((sim_cpu - sim_cpu_before) / jobs * 1000, 1)
        if sim_cpu is not None and sim_cpu_before is not None
        else None,
        "api_requests_per_job": requests_per_job(asked_before, asked, jobs),
        "time_per_job": phase_report(history),
        # The same jobs with the cluster's times of this run, through Koordinator's controller (a model).
        "koordinator_model": replay(cluster_times(milestones(history).values())),
    }


async def main_async(jobs: int, replicas: int, limits: str = "default") -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="podherd-e2e-"))
    nats_srv, redis_srv = nats_server(work / "nats"), redis_server(work / "redis")
    try:
        modes = [
            await run_mode(m, jobs, replicas, (nats_srv, redis_srv), work, limits)
            for m in ("ReservationFirst", "EvictDirectly")
        ]
    finally:
        nats_srv.stop()
        redis_srv.stop()
        shutil.rmtree(work, ignore_errors=True)
    return {"modes": modes}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=400)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--limits", choices=sorted(LIMITS), default="default")
    args = parser.parse_args()
    emit("e2e", asyncio.run(main_async(args.jobs, args.replicas, args.limits)))


if __name__ == "__main__":
    main()
