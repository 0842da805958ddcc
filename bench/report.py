"""The benchmark report: every benchmark beside its baseline, on this machine, in one run.

    python -m bench.report [--quick] [--without-side-by-side] [--into-docs]        (or `make bench`)

Runs, each in its own process so peak memory is its own:
- the watcher: initial sync and steady event rate, msgspec (as shipped) vs the Kubernetes client's models;
- the arbitrator: admission throughput and latency with 1k/10k/100k jobs pending, Podherd's event-driven
  ledger vs a model of Koordinator's full pass every 500 ms;
- end to end: jobs through the four services as processes, ReservationFirst vs EvictDirectly;
- the admission gate: review latency at 200 evictions/s beside a no-op webhook.
Writes bench/results/report.json, report.md (the tables) and admission_latency.png (admission latency
against pending jobs for both arbitration models); with `--into-docs`, the tables into
docs/design/benchmarks.md too, in place of the last ones (between its `bench-report` markers).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.results_io import RESULTS
from bench.side_by_side import table as side_by_side_rows

DOCS = Path(__file__).resolve().parents[1] / "docs" / "design" / "benchmarks.md"
START, END = "<!-- bench-report:start -->", "<!-- bench-report:end -->"

FULL = {
    "watcher": ["--nodes", "5000", "--pods", "100000", "--changes", "100000"],
    "arbitrator": ["--pending", "1000", "10000", "100000", "--secured"],
    "e2e": ["--jobs", "400", "--replicas", "2"],
    "gate": ["--rate", "200", "--seconds", "10"],
}
QUICK = {
    "watcher": ["--nodes", "500", "--pods", "10000", "--changes", "10000"],
    "arbitrator": ["--pending", "1000", "10000", "--burst", "2000", "--offered", "1000", "--secured"],
    "e2e": ["--jobs", "100", "--replicas", "1"],
    "gate": ["--rate", "200", "--seconds", "5"],
}


def run_benchmark(name: str, args: list[str]) -> dict[str, Any]:
    started = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", f"bench.{name}_bench", *args], capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise SystemExit(f"bench.{name}_bench failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads((RESULTS / f"{name}.json").read_text())
    result["_seconds"] = round(time.monotonic() - started, 1)
    return result


# Podherd beside Koordinator's own controller on the real engine (needs Go for the control plane).
SIDE_BY_SIDE = ["--jobs", "100", "1000", "--pending", "1000", "10000"]
SIDE_BY_SIDE_QUICK = ["--jobs", "100", "--pending", "1000"]


def side_by_side(args: list[str]) -> dict[str, Any]:
    """bench.side_by_side's result, or why it did not run (exit 2: no real engine here)."""
    print(f"running bench.side_by_side {' '.join(args)}", file=sys.stderr, flush=True)
    argv = [sys.executable, "-m", "bench.side_by_side", *args]
    out = subprocess.run(argv, capture_output=True, text=True, check=False)
    if out.returncode == 2:
        return {"skipped": out.stderr.strip().splitlines()[-1]}
    if out.returncode != 0:
        raise SystemExit(f"bench.side_by_side failed:\n{out.stderr[-3000:]}")
    found: dict[str, Any] = json.loads((RESULTS / "side-by-side.json").read_text())
    return found


def _row(cells: list[Any]) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def markdown(results: dict[str, Any]) -> str:
    lines = [f"# Podherd benchmark report\n\n{results['machine']}\n"]
    watcher = results["watcher"]
    lines += [
        f"## Watcher: {watcher.get('pods')} pods, {watcher.get('nodes')} nodes, acks from JetStream\n",
        _row(
            [
                "decoder",
                "initial sync events/s",
                "initial sync s",
                "steady events/s",
                "events per CPU-s",
                "peak RSS MB",
            ]
        ),
        _row(["---"] * 6),
    ]
    for v in watcher["variants"]:
        lines.append(
            _row(
                [
                    v.get("variant"),
                    f"{v.get('initial_sync_events_per_second'):,}",
                    v.get("initial_sync_seconds"),
                    f"{v.get('events_per_second'):,}",
                    f"{v.get('events_per_watcher_cpu_second'):,}",
                    v.get("peak_rss_mb"),
                ]
            )
        )
    arbitrator = results["arbitrator"]
    lines += [
        "\n## Arbitrator: admission with jobs pending (Podherd vs Koordinator's 500 ms full pass)\n",
        _row(
            [
                "pending",
                "Podherd decisions/s",
                "Podherd p50 / p99 ms",
                "Koordinator model p50 / p99 ms",
                "Koordinator pass ms",
                "Redis MB",
            ]
        ),
        _row(["---"] * 6),
    ]
    for ours, theirs in zip(arbitrator["podherd"], arbitrator["koordinator_model_500ms"], strict=True):
        lines.append(
            _row(
                [
                    f"{ours['pending']:,}",
                    f"{ours['decisions_per_second']:,}",
                    f"{ours['latency_ms_p50']} / {ours['latency_ms_p99']}",
                    f"{theirs['latency_ms_p50']} / {theirs['latency_ms_p99']}",
                    theirs["pass_ms"],
                    ours["redis_used_memory_mb_with_backlog"],
                ]
            )
        )
    lines.append(f"\nPeak RSS of the arbitrator benchmark process: {arbitrator.get('peak_rss_mb')} MB.\n")
    lines += security_table(arbitrator.get("security_cost") or [])
    lines += [
        "## End to end: jobs through the pipeline's four services as processes\n",
        _row(
            [
                "mode",
                "jobs",
                "jobs/s",
                "latency p50 / p99 s",
                "makespan s",
                "max service RSS MB",
                "service CPU ms per job",
            ]
        ),
        _row(["---"] * 7),
    ]
    for m in results["e2e"]["modes"]:
        lines.append(
            _row(
                [
                    m["mode"],
                    m["jobs"],
                    m["jobs_per_second"],
                    f"{m['latency_s_p50']} / {m['latency_s_p99']}",
                    m["makespan_seconds"],
                    m["peak_rss_mb_max"],
                    m["service_cpu_ms_per_job"]["total"],
                ]
            )
        )
    lines += gate_table(results.get("gate"))
    lines += side_by_side_table(results.get("side_by_side"))
    lines.append("\n![admission latency against pending jobs](admission_latency.png)\n")
    return "\n".join(lines)


def gate_table(gate: dict[str, Any] | None) -> list[str]:
    """The admission gate's review times beside a no-op webhook's, same load, same run."""
    if gate is None:
        return []
    plain = gate["not_opted_in"]
    rows = [("gate, not opted in", plain["gate"]), ("no-op webhook", plain["noop"])]
    rows.append(("gate, job in progress", gate["in_progress"]))
    return [
        f"\n## Admission gate: {gate['rate_per_second']:g} evictions/s each, p99 {plain['p99_ratio']}x\n",
        _row(["webhook", "reviews", "p50 ms", "p99 ms", "max ms"]),
        _row(["---"] * 5),
        *(_row([name, r["reviews"], r["p50_ms"], r["p99_ms"], r["max_ms"]]) for name, r in rows),
    ]


def side_by_side_table(result: dict[str, Any] | None) -> list[str]:
    """Podherd and Koordinator's controller on the same real-engine cluster, or why that did not run."""
    if result is None:
        return []
    if "skipped" in result:
        return [f"\n## Beside Koordinator's own controller: not run ({result['skipped']})\n"]
    return [
        f"\n## Beside Koordinator's own controller, real engine ({result['cluster']})\n",
        *side_by_side_rows(result),
        "",
    ]


def security_table(rows: list[dict[str, Any]]) -> list[str]:
    """The arbitrator plain and as deploy/ runs it (TLS to Redis and NATS, an ACL user), same servers."""
    if not rows:
        return []
    lines = [
        "### What TLS and ACL users cost the arbitrator (one redis-server and nats-server binary for both)\n",
        _row(
            [
                "pending",
                "decisions/s plain / TLS+ACL",
                "p99 ms plain / TLS+ACL",
                "CPU µs per decision",
                "ratio",
            ]
        ),
        _row(["---"] * 5),
    ]
    for r in rows:
        cpu = f"{r['arbitrator_cpu_us_per_decision_plain']} / {r['arbitrator_cpu_us_per_decision_tls_acl']}"
        lines.append(
            _row(
                [
                    f"{r['pending']:,}",
                    f"{r['decisions_per_second_plain']:,} / {r['decisions_per_second_tls_acl']:,}",
                    f"{r['latency_ms_p99_plain']} / {r['latency_ms_p99_tls_acl']}",
                    cpu,
                    r["decisions_ratio_tls_acl_to_plain"],
                ]
            )
        )
    return [*lines, ""]


def plot(arbitrator: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pending = [d["pending"] for d in arbitrator["podherd"]]
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    for label, rows, style in (
        ("Podherd (event-driven ledger)", arbitrator["podherd"], "o-"),
        ("Koordinator model (full pass / 500 ms)", arbitrator["koordinator_model_500ms"], "s--"),
    ):
        ax.plot(pending, [r["latency_ms_p50"] for r in rows], style, label=f"{label} p50")
        ax.plot(pending, [r["latency_ms_p99"] for r in rows], style, alpha=0.5, label=f"{label} p99")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("jobs pending")
    ax.set_ylabel("admission latency (ms)")
    ax.set_title("Admission latency against pending jobs")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def machine() -> str:
    cpus = Path("/proc/cpuinfo").read_text().count("processor\t:") if Path("/proc/cpuinfo").exists() else "?"
    return (
        f"Machine: {cpus} CPUs, Python {sys.version.split()[0]}; every server shares them with the benchmark."
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a few minutes instead of ~15)")
    parser.add_argument(
        "--without-side-by-side",
        action="store_true",
        help="leave out Koordinator's controller on the real engine (hours at 10k pending): run it alone",
    )
    parser.add_argument("--into-docs", action="store_true", help="write the tables into the benchmarks page")
    args = parser.parse_args()
    sizes = QUICK if args.quick else FULL
    results: dict[str, Any] = {"machine": machine(), "quick": args.quick}
    for name, bench_args in sizes.items():
        print(f"running bench.{name}_bench {' '.join(bench_args)}", file=sys.stderr, flush=True)
        results[name] = run_benchmark(name, bench_args)
    if not args.without_side_by_side:
        results["side_by_side"] = side_by_side(SIDE_BY_SIDE_QUICK if args.quick else SIDE_BY_SIDE)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "report.json").write_text(json.dumps(results, indent=2) + "\n")
    (RESULTS / "report.md").write_text(markdown(results))
    plot(results["arbitrator"], RESULTS / "admission_latency.png")
    print((RESULTS / "report.md").read_text())
    if args.into_docs:
        DOCS.write_text(into_docs(DOCS.read_text(), results))


def into_docs(page: str, results: dict[str, Any]) -> str:
    """`page` with the report's tables in place of the last ones: its headings a level down, dated."""
    body = re.sub(r"^## ", "### ", markdown(results).split("\n", 1)[1], flags=re.MULTILINE)
    body = body.replace("![admission latency against pending jobs](admission_latency.png)", "").rstrip()
    when = time.strftime("%Y-%m-%d")
    apart = "" if "side_by_side" in results else " (beside Koordinator's controller: its own section below)"
    block = f"{START}\n\nLast report (`python -m bench.report`), {when}{apart}. {body.strip()}\n\n{END}"
    head, _, rest = page.partition(START)
    return head + block + rest.partition(END)[2]


if __name__ == "__main__":
    main()
