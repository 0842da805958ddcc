"""`podherd demo --scenario maintenance`: a node taken down for maintenance, twice, on the same cluster.

1. A plain drain (`plain_drain`: kubectl drain's algorithm, in Python) of `node-1` on kubesim's
   `maintenance` cluster: cordon, evict everything the budgets allow at once, retry what they refuse.
2. `podherd drain node-1` on a fresh copy of the same cluster, through the pipeline's four services: room
   reserved first, single replicas and zero-budget Deployments moved by Surge, every eviction within the
   budgets.

Both are measured the same way, from pod events (`availability`): per workload, the fewest Ready replicas,
seconds below its replicas and at zero, and pods left Pending; side by side at the end. The numbers are
measured, not asserted: the command fails only if Podherd's own drain did not empty the node, or took a
workload below its replicas.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

import kubernetes

from podherd import client, drain
from podherd.demo.availability import Availability
from podherd.demo.engines import start_cluster
from podherd.demo.plain_drain import plain_drain
from podherd.demo.services_up import keep_up, started, stay_up
from shared.api.drain import DrainOptions
from shared.api.messages import DrainIntent
from shared.config.model import PodherdConfig

NODE = "node-1"
APPS = ["solo", "guarded", "web", "db"]
PLAIN_TIMEOUT = 6.0  # seconds kubectl drain retries what the budgets refuse (its --timeout)
RECOVERY = 20.0  # seconds a drained workload may take to be back at its replicas before it is measured


def _core(kubeconfig: Path) -> Any:
    return kubernetes.client.CoreV1Api(kubernetes.config.new_client_from_config(config_file=str(kubeconfig)))


def _agent(kubeconfig: Path) -> None:
    """The DaemonSet every node runs (a drain leaves its pods), and its pods Ready."""
    apps = kubernetes.client.AppsV1Api(kubernetes.config.new_client_from_config(config_file=str(kubeconfig)))
    template = {
        "metadata": {"labels": {"app": "agent"}},
        "spec": {"containers": [{"name": "a", "image": "a"}]},
    }
    body: Any = {
        "metadata": {"name": "agent"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": template},
    }
    apps.create_namespaced_daemon_set("default", body)


def _recovered(watch: Availability, within: float) -> None:
    """Until every workload is back at its replicas (or `within` seconds): what a drain leaves is counted."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline and not watch.recovered():
        time.sleep(0.2)


def _measured(core: Any, drain_it: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run a drain of NODE while its workloads' availability is measured; what it left on the node."""
    watch = Availability(core, APPS).start()
    result = drain_it()
    _recovered(watch, RECOVERY)
    measured = watch.stop()
    left = core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={NODE}").items
    movable = [p.metadata.name for p in left if (p.metadata.labels or {}).get("app") != "agent"]
    return {**measured, **result, "drained": not movable, "left_on_node": movable}


def plain_run(out: TextIO, *, timeout: float, engine: str) -> dict[str, Any]:
    with contextlib.ExitStack() as stack:
        sim = start_cluster(engine, "maintenance")
        stack.callback(sim.stop)
        _agent(sim.kubeconfig)
        core = _core(sim.kubeconfig)
        print(
            f"\n1. plain drain of {NODE} (kubectl drain's algorithm, in Python; --timeout {timeout:.0f}s)",
            file=out,
        )
        measured = _measured(core, lambda: plain_drain(core, NODE, timeout=timeout).as_dict())
        print(f"   evicted {measured['evicted']} pods; gave up on {len(measured['gave_up_on'])}", file=out)
        for pod, why in measured["gave_up_on"].items():
            print(f"   {pod}: {why}", file=out)
        return measured


async def _podherd_drain(config: PodherdConfig, out: TextIO, *, within: float) -> dict[str, Any]:
    sender = client.Sender.of(config)
    subjects = sender.subjects
    options = DrainOptions(ignore_daemonsets=True, timeout=f"{within:.0f}s")
    intent = DrainIntent(kind="Drain", node=NODE, requester="podherd-demo", options=options)
    started = client.now_utc()
    clock = time.monotonic()
    async with client.nats_client(config) as nc:
        reply = await drain.request_drain(nc, sender, intent, within=30)
        for line in drain.plan_lines(reply):
            print(f"   {line}", file=out, flush=True)
        jobs = {move.job: move.pod for move in reply.moves}
        outcome = await drain.follow(
            nc,
            subjects,
            jobs,
            since=started,
            within=within + drain.FOLLOW_GRACE,
            show=lambda line: print(f"   {line}", file=out, flush=True),
        )
    failed = outcome.failed()
    return {"moved": len(jobs) - len(failed), "failed": failed, "seconds": round(time.monotonic() - clock, 1)}


def podherd_run(config: PodherdConfig, kubeconfig: Path, out: TextIO, *, within: float) -> dict[str, Any]:
    core = _core(kubeconfig)
    print(
        f"\n2. podherd drain {NODE} (room reserved first; Surge where a workload cannot spare its pod)",
        file=out,
    )
    return _measured(core, lambda: asyncio.run(_podherd_drain(config, out, within=within)))


def side_by_side(
    plain: dict[str, Any], podherd: dict[str, Any], names: tuple[str, str] = ("plain drain", "podherd drain")
) -> list[str]:
    def drained(run: dict[str, Any]) -> str:
        if run["drained"]:
            return f"yes, in {run['seconds']}s"
        refused = run.get("gave_up_on") or {}
        why = f" (evictions refused by a budget until it gave up: {len(refused)})" if refused else ""
        return f"no: {len(run['left_on_node'])} pods left{why}"

    rows = [("", *names), ("node emptied", drained(plain), drained(podherd))]
    for app in APPS:
        a, b = plain["apps"][app], podherd["apps"][app]

        def cell(m: dict[str, Any]) -> str:
            return f"{m['replicas_unavailable']} unavailable at worst, {m['seconds_down']}s down"

        rows.append((f"{app} ({a['desired']} replicas)", cell(a), cell(b)))
    rows.append(("pods left Pending", str(plain["pods_left_pending"]), str(podherd["pods_left_pending"])))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    return ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]


def run_maintenance(opts: Any, out: TextIO, *, processes: Any) -> int:
    """`processes(opts, stack, workdir)` starts kubesim (`maintenance`), NATS, Redis and the pipeline's four
    services as the defragmentation demo does."""
    plain = plain_run(out, timeout=PLAIN_TIMEOUT, engine=opts.engine)
    workdir = Path(opts.workdir or tempfile.mkdtemp(prefix="podherd-maintenance-"))
    workdir.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        services = processes(opts, stack, workdir, scenario="maintenance")
        config, kube = started(services, stack, workdir)
        _agent(services.kubeconfig)
        ours = podherd_run(config, services.kubeconfig, out, within=opts.timeout)
        codes = {} if opts.keep else services.stop(kube)
        kept_up = keep_up(opts.keep, stack, services, workdir=workdir)
    print("", file=out)
    for line in side_by_side(plain, ours):
        print(line, file=out)
    summary = {"plain_drain": plain, "podherd_drain": ours, "services_exit_codes": codes}
    if opts.summary_json:
        Path(opts.summary_json).write_text(json.dumps(summary, indent=2))
    kept = all(m["seconds_down"] == 0 and m["lowest_ready"] > 0 for m in ours["apps"].values())
    ok = ours["drained"] and kept and not ours["failed"] and all(c == 0 for c in codes.values())
    verdict = "zero downtime" if kept else "a workload had no Ready replica"
    print(
        f"\npodherd drain: {verdict}; node {NODE} {'drained' if ours['drained'] else 'NOT drained'}", file=out
    )
    stay_up(kept_up, out)
    return 0 if ok else 1
