"""A rebalancing plan shown: the moves, each node's fill before and after, the policy's measure; as a table,
as YAML or JSON for machines, and as a picture of the nodes' fill before and after."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from podherd.client import table
from podherd.errors import CliError
from podherd.rebalance import Outcome

SHOWN = ("cpu", "memory", "pods")


def as_data(outcome: Outcome) -> dict[str, Any]:
    planning, measure = outcome.planning, outcome.measure
    return {
        "policy": outcome.policy,
        "measure": {"name": measure.name, "before": measure.before, "after": measure.after},
        "moves": [
            {"pod": m.pod, "from": m.source, "to": m.target, "wave": m.wave + 1, "why": m.why}
            for m in planning.moves
        ],
        "nodes": {
            node: {
                "before": {r: round(v, 1) for r, v in outcome.before[node].items()},
                "after": {r: round(v, 1) for r, v in outcome.after[node].items()},
            }
            for node in outcome.before
        },
        "emptied": sorted(planning.emptying),
        "stays": dict(sorted(planning.skipped.items())),
        "unread": outcome.unread,
    }


def render(outcome: Outcome, output: str) -> str:
    if output == "json":
        return json.dumps(as_data(outcome), indent=2)
    if output == "yaml":
        return yaml.safe_dump(as_data(outcome), sort_keys=False)
    measure = outcome.measure
    lines = [f"{outcome.policy}: {measure.name} {measure.before:g} -> {measure.after:g}"]
    moves = [(m.pod, m.source, m.target, str(m.wave + 1), m.why) for m in outcome.planning.moves]
    lines.append(table(("POD", "FROM", "TO", "WAVE", "WHY"), moves) if moves else "no move")
    rows = [
        (node, *(_change(outcome.before[node].get(r), outcome.after[node].get(r)) for r in SHOWN))
        for node in outcome.before
    ]
    lines.append(table(("NODE", "CPU %", "MEMORY %", "PODS %"), rows))
    lines.extend(_stays(outcome.planning.skipped, every=output == "wide"))
    return "\n".join(lines)


def _stays(skipped: dict[str, str], *, every: bool) -> list[str]:
    """The pods the plan leaves where they are and why: each one (`-o wide`), or how many for each why."""
    if not skipped:
        return []
    if every:
        return [table(("STAYS", "WHY"), sorted(skipped.items()))]
    counted: dict[str, int] = {}
    for why in skipped.values():
        counted[why] = counted.get(why, 0) + 1
    rows = [(str(n), why) for why, n in sorted(counted.items(), key=lambda item: (-item[1], item[0]))]
    return [table(("STAY", "WHY (each pod: -o wide)"), rows)]


def _change(before: float | None, after: float | None) -> str:
    if before is None or after is None:
        return "-"
    return f"{before:.0f}" if round(before) == round(after) else f"{before:.0f} -> {after:.0f}"


ZONE = "topology.kubernetes.io/zone"
SPREAD = "RemovePodsViolatingTopologySpreadConstraint"


def picture(outcome: Outcome, path: str) -> None:
    """Each node's CPU and memory fill and its pods before and after the plan, as bars, into a PNG; the
    nodes the plan empties marked; for spread repair, the pods of the moved workloads per zone too."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot
    except ImportError as exc:
        raise CliError("--picture needs matplotlib: pip install 'podherd[picture]'") from exc
    nodes = sorted(outcome.before, key=_natural)
    zones = zone_counts(outcome) if outcome.policy == SPREAD else {}
    panels = 3 + bool(zones)
    width = max(8.0, 0.22 * len(nodes) + 2)
    figure = pyplot.figure(figsize=(width, 2.4 * panels + 1))
    grid = figure.add_gridspec(panels, 1)
    axes = [figure.add_subplot(grid[i]) for i in range(3)]
    emptied = outcome.planning.emptying
    positions = list(range(len(nodes)))
    counts = pod_counts(outcome)
    for ax, resource in zip(axes, ("cpu", "memory", "pods"), strict=True):
        if resource == "pods":  # how many: a node's pod capacity is far above what it holds
            before: list[float] = [counts[n][0] for n in nodes]
            after: list[float] = [counts[n][1] for n in nodes]
        else:
            before = [outcome.before[n].get(resource, 0) for n in nodes]
            after = [outcome.after[n].get(resource, 0) for n in nodes]
        ax.bar([p - 0.2 for p in positions], before, 0.4, label="before")
        ax.bar([p + 0.2 for p in positions], after, 0.4, label="after")
        for (name, limits), style in zip(outcome.lines.items(), ("dotted", "dashed"), strict=False):
            if resource in limits and resource != "pods":
                ax.axhline(limits[resource], color="grey", linestyle=style, linewidth=1, label=name)
        if resource == "pods":
            ax.set_ylabel("pods", fontsize=8)
        else:
            ax.set_ylabel(f"{resource}, % of allocatable", fontsize=8)
            ax.set_ylim(0, 100)
        ax.set_xlim(-0.7, len(nodes) - 0.3)
        ax.set_xticks(positions, nodes, rotation=90, fontsize=7)
        ax.legend(loc="upper right", fontsize=7, ncol=4, framealpha=0.9)
    for label in (label for ax in axes for label in ax.get_xticklabels()):
        if label.get_text() in emptied:
            label.set_color("firebrick")
            label.set_fontweight("bold")
    if emptied:
        axes[0].set_title(f"emptied by the plan (in red): {len(emptied)} nodes", fontsize=8, loc="left")
    if zones:
        _zones_panel(figure.add_subplot(grid[3]), zones)
    measure = outcome.measure
    figure.suptitle(f"{outcome.policy}: {measure.name} {measure.before:g} -> {measure.after:g}")
    figure.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(Path(path), dpi=100)
    pyplot.close(figure)


def pod_counts(outcome: Outcome) -> dict[str, tuple[int, int]]:
    """Each node's pods: (before the plan, after)."""
    planning = outcome.planning
    before: Counter[str] = Counter(c.view.node for c in planning.candidates.values() if c.view.node)
    after = Counter(before)
    for move in planning.moves:
        after[move.source] -= 1
        after[move.target] += 1
    return {node: (before[node], after[node]) for node in outcome.before}


def zone_counts(outcome: Outcome) -> dict[str, tuple[int, int]]:
    """Pods of the workloads the plan moves, per zone: (before, after)."""
    planning = outcome.planning
    owners = {m.owner for m in planning.moves if m.owner}
    zone_of = {n: view.labels.get(ZONE, "(no zone)") for n, view in planning.cluster.nodes.items()}
    before: Counter[str] = Counter()
    after: Counter[str] = Counter()
    for key, candidate in planning.candidates.items():
        if candidate.owner not in owners:
            continue
        now = planning.views.get(key, candidate.view).node
        before[zone_of.get(candidate.view.node or "", "(no zone)")] += 1
        after[zone_of.get(now or "", "(no zone)")] += 1
    return {zone: (before[zone], after[zone]) for zone in sorted(set(before) | set(after))}


def _zones_panel(ax: Any, zones: dict[str, tuple[int, int]]) -> None:
    names = list(zones)
    positions = list(range(len(names)))
    ax.bar([p - 0.2 for p in positions], [zones[z][0] for z in names], 0.4, label="before")
    ax.bar([p + 0.2 for p in positions], [zones[z][1] for z in names], 0.4, label="after")
    ax.set_xticks(positions, names, fontsize=8)
    ax.set_ylabel("pods of the moved workloads", fontsize=8)
    ax.set_title("per zone", fontsize=8, loc="left")
    ax.legend(loc="upper right", fontsize=7)


def _natural(name: str) -> list[int | str]:
    """node-2 before node-10."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]
