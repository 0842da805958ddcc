"""The size limits `make lint` holds production code to: a file or class over its limit fails."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import check_sizes


def test_files_and_classes_over_their_limits_are_named() -> None:
    measured = {"big.py": 451, "big.py:Huge": 201, "ok.py": 450, "ok.py:C": 200}
    assert check_sizes.problems(measured) == [
        "big.py: 451 lines, over the limit 450",
        "big.py:Huge: 201 lines, over the limit 200",
    ]


def test_the_tree_holds_the_limits() -> None:
    measured, functions = check_sizes.sizes()
    assert check_sizes.problems(measured) == []
    assert functions
