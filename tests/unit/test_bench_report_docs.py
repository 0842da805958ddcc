"""The benchmarks page takes the report's tables in place of the last ones, and keeps every other word."""

from __future__ import annotations

from typing import Any

from bench.report import END, START, into_docs

RESULTS: dict[str, Any] = {
    "machine": "Machine: 2 CPUs",
    "watcher": {"pods": 10, "nodes": 2, "variants": []},
    "arbitrator": {"podherd": [], "koordinator_model_500ms": [], "peak_rss_mb": 1},
    "e2e": {"modes": []},
}


def test_the_reports_tables_replace_the_last_ones_and_nothing_else() -> None:
    page = f"# Benchmarks\n\nintro\n\n{START}\n\nold table\n\n{END}\n\nafter\n"
    once = into_docs(page, RESULTS)
    assert "old table" not in once
    assert once.startswith("# Benchmarks\n\nintro\n\n" + START) and once.endswith(f"{END}\n\nafter\n")
    assert "\n### Watcher: 10 pods, 2 nodes" in once and "\n## " not in once.split(START)[1]
    assert "\n#### " not in once
    assert into_docs(once, RESULTS) == once  # run again the same day: the same page
