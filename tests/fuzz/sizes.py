"""How much fuzzing a run does. `make test` runs the CI size, which fits the suite's time budget;
`make fuzz` (`pytest tests/fuzz --fuzz=full`) runs the full counts. Set by tests/conftest.py before the
fuzz modules are imported."""

from __future__ import annotations

FULL = False


def count(*, ci: int, full: int) -> int:
    return full if FULL else ci
