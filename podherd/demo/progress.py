"""The demo's progress line: each job's phase, how full each node is, the peak of each disruption limit the
watchdog saw, and where the pending pod is."""

from __future__ import annotations

from collections import Counter
from typing import Any

import msgspec

from podherd.watchdog.invariants import Findings
from shared.api import paths
from shared.api.pmj import TERMINAL_PHASES
from shared.api.quantity import milli
from shared.kube.client import KubeClient
from shared.rebalance.defrag import Defrag


async def state(kube: KubeClient, chosen: Defrag, jobs: list[str]) -> dict[str, Any]:
    phases: Counter[str] = Counter()
    for name in jobs:
        job = await kube.get_json(paths.job(name)) or {}
        phases[(job.get("status") or {}).get("phase") or "Pending"] += 1
    namespace, _, name = chosen.pending.key.partition("/")
    pending = await kube.get_json(paths.pod(namespace, name)) or {}
    pods = msgspec.json.decode(await kube.arequest("GET", paths.PODS)).get("items") or []
    nodes = msgspec.json.decode(await kube.arequest("GET", paths.NODES)).get("items") or []
    fill = {}
    for node in nodes:
        capacity = milli((node.get("status") or {}).get("allocatable", {}).get("cpu", "0"))
        used = sum(
            milli(c.get("resources", {}).get("requests", {}).get("cpu", "0"))
            for p in pods
            if (p.get("spec") or {}).get("nodeName") == node["metadata"]["name"]
            and (p.get("status") or {}).get("phase") in ("Pending", "Running")
            for c in p["spec"].get("containers") or []
        )
        fill[node["metadata"]["name"]] = used / capacity if capacity else 0.0
    return {
        "phases": phases,
        "ended": sum(n for phase, n in phases.items() if phase in TERMINAL_PHASES),
        "pending_phase": (pending.get("status") or {}).get("phase"),
        "pending_node": (pending.get("spec") or {}).get("nodeName"),
        "fill": fill,
    }


def _bar(fraction: float, width: int = 4) -> str:
    full = round(min(max(fraction, 0.0), 1.0) * width)
    return "█" * full + "·" * (width - full)


def line(state: dict[str, Any], findings: Findings) -> str:
    phases = " ".join(f"{p}={n}" for p, n in sorted(state["phases"].items()))
    nodes = " ".join(f"{n.removeprefix('node-')}[{_bar(f)}]" for n, f in sorted(state["fill"].items()))
    slots = " ".join(f"{k}={v}" for k, v in sorted(findings.peak_slots.items())) or "-"
    where = state["pending_node"] or "pending"
    return f"jobs {phases} | peak slots {slots} | big: {where} | nodes {nodes}"
