"""The keyword-only rule `make lint` holds production code to: past three positional parameters (self and
cls aside), the rest are keyword-only, except where a caller's callable type fixes the signature."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import check_signatures

SOURCE = """
def three(a, b, c): ...
def four(a, b, c, d): ...
def keyword(a, b, c, *, d, e): ...
class C:
    def method(self, a, b, c): ...
    def heavy(self, a, b, c, d): ...
    @classmethod
    def make(cls, a, b, c): ...
def outer():
    def inner(a, b, c, d, e): ...
"""


def test_functions_past_three_positional_parameters_are_found() -> None:
    found = check_signatures.positional_heavy("m.py", SOURCE)
    assert found == {"m.py:four": 4, "m.py:C.heavy": 4, "m.py:outer.inner": 5}


def test_only_listed_caller_fixed_signatures_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(check_signatures, "CALLER_FIXED", {"m.py:four": "a callback", "m.py:gone": "x"})
    found = check_signatures.positional_heavy("m.py", SOURCE)
    assert check_signatures.problems(found) == [
        "m.py:C.heavy: 4 positional parameters, more than 3: make the rest keyword-only",
        "m.py:outer.inner: 5 positional parameters, more than 3: make the rest keyword-only",
        "m.py:gone: listed as caller-fixed, but it is not there any more",
    ]


def test_the_tree_keeps_the_rule() -> None:
    assert check_signatures.main() == 0
