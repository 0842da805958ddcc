"""Keyword-only parameters, checked by `make lint`: a function of services/, shared/, kubesim/ or podherd/
takes at most three arguments by position (self and cls aside); the rest are keyword-only, so a call says
what it passes.

The exceptions are functions whose signature a caller fixes: a callable type that passes its arguments by
position (listed with the reason).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("services", "shared", "kubesim", "podherd")
MOST_POSITIONAL = 3
CALLER_FIXED = {
    "kubesim/apiserver/admission.py:Admission.__call__": "an admission hook of the store (store.Admission)",
    "kubesim/apiserver/schema.py:_nullable_type": "a jsonschema type validator",
    "kubesim/kubelet/containers.py:Host.event": "the runtime's event callable",
    "kubesim/sim.py:Simulator._kubelet_event": "the runtime's event callable",
    "kubesim/sim.py:Simulator._pod_token": "the runtime's token callable",
}


def positional_heavy(path: str, source: str) -> dict[str, int]:
    """`path:Class.function` -> positional parameters, for each function taking more than the limit."""
    found: dict[str, int] = {}

    def visit(node: ast.AST, owner: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, f"{owner}{child.name}.")
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                params = [a.arg for a in child.args.posonlyargs + child.args.args]
                if owner and params[:1] in (["self"], ["cls"]):
                    params = params[1:]
                if len(params) > MOST_POSITIONAL:
                    found[f"{path}:{owner}{child.name}"] = len(params)
                visit(child, f"{owner}{child.name}.")
            else:
                visit(child, owner)

    visit(ast.parse(source), "")
    return found


def problems(found: dict[str, int]) -> list[str]:
    out = [
        f"{name}: {count} positional parameters, more than {MOST_POSITIONAL}: make the rest keyword-only"
        for name, count in sorted(found.items())
        if name not in CALLER_FIXED
    ]
    out += [
        f"{name}: listed as caller-fixed, but it is not there any more"
        for name in CALLER_FIXED
        if name not in found
    ]
    return out


def main() -> int:
    found: dict[str, int] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found.update(positional_heavy(path.relative_to(ROOT).as_posix(), path.read_text()))
    for line in problems(found):
        print(f"signature: {line}", file=sys.stderr)
    return 1 if problems(found) else 0


if __name__ == "__main__":
    sys.exit(main())
