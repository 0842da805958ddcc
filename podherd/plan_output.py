"""A rebalancing plan shown: the moves, each node's fill before and after, the policy's measure; as a table,
as YAML or JSON for machines, and as a picture of the nodes' fill before and after."""

from __future__ import annotations

import json
import re
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


def picture(outcome: Outcome, path: str) -> None:
    """Each node's CPU and memory fill before and after the plan, as bars, into a PNG."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot
    except ImportError as exc:
        raise CliError("--picture needs matplotlib: pip install 'podherd[picture]'") from exc
    nodes = sorted(outcome.before, key=_natural)
    figure, axes = pyplot.subplots(2, 1, figsize=(max(6.0, 0.25 * len(nodes) + 2), 6), sharex=True)
    for ax, resource in zip(axes, ("cpu", "memory"), strict=True):
        positions = range(len(nodes))
        ax.bar(
            [p - 0.2 for p in positions],
            [outcome.before[n].get(resource, 0) for n in nodes],
            0.4,
            label="before",
        )
        ax.bar(
            [p + 0.2 for p in positions],
            [outcome.after[n].get(resource, 0) for n in nodes],
            0.4,
            label="after",
        )
        for (name, limits), style in zip(outcome.lines.items(), ("dotted", "dashed"), strict=False):
            if resource in limits:
                ax.axhline(limits[resource], color="grey", linestyle=style, linewidth=1, label=name)
        ax.set_ylabel(f"{resource} requested, %")
        ax.set_ylim(0, 100)
        ax.legend(loc="upper left", fontsize=7, ncol=4, framealpha=0.9)
    axes[-1].set_xticks(list(range(len(nodes))), nodes, rotation=90, fontsize=6)
    measure = outcome.measure
    figure.suptitle(f"{outcome.policy}: {measure.name} {measure.before:g} -> {measure.after:g}")
    figure.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(Path(path), dpi=100)
    pyplot.close(figure)


def _natural(name: str) -> list[int | str]:
    """node-2 before node-10."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]
