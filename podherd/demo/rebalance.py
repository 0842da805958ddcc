"""`podherd demo --scenario rebalance`: a skewed 50-node cluster rebalanced twice, on two copies of it.

1. As the descheduler runs its policies (`harness.descheduler_style`): LowNodeUtilization, then
   HighNodeUtilization, each evicting and leaving the replacements to the scheduler.
2. Through the pipeline's four services: `podherd rebalance` with LowNodeUtilization, spread repair and
   HighNodeUtilization, each move a job with its room reserved first, the watchdog on throughout. The nodes'
   fill before and after each Podherd plan is drawn into the work directory (`rebalance-*.png`).

Side by side at the end: moves, replacements stranded, moves undone, nodes still over their targets. The
command fails only if Podherd's run broke a promise (a replacement Pending, a limit exceeded, an eviction
without room) or left a node over its targets.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
from pathlib import Path
from typing import Any, TextIO

import kubernetes

from podherd import client, plan_output, rebalance
from podherd.demo.engines import start_cluster
from podherd.demo.services_up import KeptUp, keep_up, started, stay_up
from podherd.harness import descheduler_style
from podherd.watchdog.invariants import deployment_watchdog
from shared.config.model import PodherdConfig
from shared.kube.client import KubeClient
from shared.rebalance.policy_run import PolicyOptions
from shared.redis import client as redis_client

THRESHOLDS = {"cpu": 20.0, "memory": 20.0, "pods": 20.0}
TARGETS = {"cpu": 50.0, "memory": 50.0, "pods": 50.0}
CONSOLIDATE = {"cpu": 10.0, "memory": 10.0, "pods": 10.0}
POLICIES = (
    PolicyOptions("LowNodeUtilization", THRESHOLDS, TARGETS),
    PolicyOptions("RemovePodsViolatingTopologySpreadConstraint", THRESHOLDS, TARGETS),
    PolicyOptions("HighNodeUtilization", CONSOLIDATE, TARGETS),
)
SETTLE = 120.0  # seconds the evicted pods' replacements may take to be placed or found unschedulable


def descheduler_run(out: TextIO, engine: str) -> dict[str, Any]:
    print("\n1. as the descheduler runs them: evict, reserve nothing, let the scheduler place", file=out)
    sim = start_cluster(engine, "rebalance")
    try:
        found = descheduler_style.run(
            str(sim.kubeconfig),
            thresholds=THRESHOLDS,
            targets=TARGETS,
            consolidate=CONSOLIDATE,
            settle=SETTLE,
        )
    finally:
        sim.stop()
    for name, result in found.items():
        print(
            f"   {name}: evicted {result['moves']}; {len(result['stranded'])} replacements stranded, "
            f"{len(result['undone'])} placed back where the policy took them from",
            file=out,
        )
    return found


async def _podherd_run(
    config: PodherdConfig, kube: KubeClient, *, core: Any, workdir: Path, out: TextIO
) -> dict[str, Any]:
    store = redis_client.connect(config.redis)
    watchdog = deployment_watchdog(kube, store, config)
    stop = asyncio.Event()
    watching = asyncio.create_task(watchdog.run(stop))
    sender = client.Sender.of(config)
    found: dict[str, Any] = {}
    try:
        for options in POLICIES:
            outcome = await asyncio.to_thread(rebalance.make_plan, options, config)
            picture = workdir / f"rebalance-{options.policy}.png"
            await asyncio.to_thread(plan_output.picture, outcome, str(picture))
            measure = outcome.measure
            print(
                f"   {options.policy}: {len(outcome.planning.moves)} moves planned in "
                f"{len(outcome.planning.waves())} waves, {measure.name} "
                f"{measure.before:g} -> {measure.after:g} (picture: {picture})",
                file=out,
                flush=True,
            )
            # Consolidation as one atomic plan: every move's room held before the first pod goes.
            atomic = options.policy == "HighNodeUtilization" and len(outcome.planning.waves()) == 1
            carried = await rebalance.carry_out(
                config,
                outcome,
                sender=sender,
                requester="podherd-demo",
                answer_within=30,
                follow_within=SETTLE,
                show=lambda line: None,
                atomic_timeout="2m" if atomic else None,
            )
            if options.policy == "LowNodeUtilization":  # what it is for: consolidation fills nodes again
                over = await asyncio.to_thread(descheduler_style.over_targets, core, TARGETS)
                found["over_targets"] = len(over)
            found[options.policy] = {
                "moves": len(carried.jobs) - len(carried.failed),
                "atomic": atomic,
                "waves": len(outcome.planning.waves()),
                "failed": carried.failed,
                "refused": carried.refused,
                "measure": {"before": measure.before, "after": measure.after},
            }
    finally:
        stop.set()
        findings = await watching
        await store.aclose()
    found["replacements_pending"] = sorted(findings.pending_replacements)
    found["limits_exceeded"] = findings.limits_exceeded
    found["evictions_without_room"] = findings.evictions_without_room
    return found


def podherd_run(opts: Any, out: TextIO, *, processes: Any) -> tuple[dict[str, Any], KeptUp | None]:
    print("\n2. podherd rebalance: every move a job, its room held before the pod goes", file=out)
    workdir = Path(opts.workdir or tempfile.mkdtemp(prefix="podherd-rebalance-"))
    workdir.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        services = processes(opts, stack, workdir, scenario="rebalance")
        config, kube = started(services, stack, workdir)
        core = kubernetes.client.CoreV1Api(
            kubernetes.config.new_client_from_config(config_file=str(services.kubeconfig))
        )
        ours = asyncio.run(_podherd_run(config, kube, core=core, workdir=workdir, out=out))
        ours["services_exit_codes"] = {} if opts.keep else services.stop(kube)
        kept = keep_up(opts.keep, stack, services, workdir=workdir)
    return ours, kept


def side_by_side(theirs: dict[str, Any], ours: dict[str, Any]) -> list[str]:
    low, high = "LowNodeUtilization", "HighNodeUtilization"
    rows = [
        ("", "descheduler's way", "podherd rebalance"),
        (f"{low}: moves", str(theirs[low]["moves"]), str(ours[low]["moves"])),
        (f"{low}: nodes still over targets", str(theirs[low]["over_targets"]), str(ours["over_targets"])),
        (f"{high}: moves", str(theirs[high]["moves"]), str(ours[high]["moves"])),
        (
            "replacements stranded (Pending)",
            str(len(theirs[low]["stranded"]) + len(theirs[high]["stranded"])),
            str(len(ours["replacements_pending"])),
        ),
        ("moves undone", str(len(theirs[low]["undone"]) + len(theirs[high]["undone"])), "0"),
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    return ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]


def run_rebalance(opts: Any, out: TextIO, *, processes: Any) -> int:
    """`processes(opts, stack, workdir, scenario=...)` starts kubesim, NATS, Redis and the pipeline's four
    services as the defragmentation demo does."""
    theirs = descheduler_run(out, opts.engine)
    ours, kept_up = podherd_run(opts, out, processes=processes)
    print("", file=out)
    for line in side_by_side(theirs, ours):
        print(line, file=out)
    if opts.summary_json:
        Path(opts.summary_json).write_text(
            json.dumps({"descheduler_style": theirs, "podherd": ours}, indent=2)
        )
    kept = (
        not ours["replacements_pending"]
        and ours["limits_exceeded"] == 0
        and not ours["evictions_without_room"]
    )
    moved = all(not ours[p.policy]["failed"] and not ours[p.policy]["refused"] for p in POLICIES)
    ok = (
        kept
        and moved
        and ours["over_targets"] == 0
        and all(c == 0 for c in ours["services_exit_codes"].values())
    )
    print(
        f"\npodherd rebalance: {'every promise kept' if kept else 'a promise broken'}; "
        f"{ours['over_targets']} nodes over their targets after LowNodeUtilization",
        file=out,
    )
    stay_up(kept_up, out)
    return 0 if ok else 1
