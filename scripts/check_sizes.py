"""The size limits of production code, checked by `make lint`: no file over 450 lines and no class over
200 lines in services/, shared/, kubesim/ and podherd/. It prints the median function length beside.
"""

from __future__ import annotations

import ast
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("services", "shared", "kubesim", "podherd")
FILE_LIMIT, CLASS_LIMIT = 450, 200


def sizes() -> tuple[dict[str, int], list[int]]:
    measured: dict[str, int] = {}
    functions: list[int] = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            text = path.read_text()
            measured[name] = len(text.splitlines())
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, ast.ClassDef):
                    measured[f"{name}:{node.name}"] = (node.end_lineno or node.lineno) - node.lineno + 1
                elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    functions.append((node.end_lineno or node.lineno) - node.lineno + 1)
    return measured, functions


def problems(measured: dict[str, int]) -> list[str]:
    out = []
    for key, lines in sorted(measured.items()):
        limit = CLASS_LIMIT if ":" in key else FILE_LIMIT
        if lines > limit:
            out.append(f"{key}: {lines} lines, over the limit {limit}")
    return out


def main() -> int:
    measured, functions = sizes()
    found = problems(measured)
    for line in found:
        print(f"size: {line}", file=sys.stderr)
    print(
        f"sizes: {sum(1 for k in measured if ':' not in k)} files, {len(functions)} functions "
        f"(median {statistics.median(functions):.0f} lines)"
    )
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
