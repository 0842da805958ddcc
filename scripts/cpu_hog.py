"""A noisy neighbour: one process spinning one core, for at most `seconds` (default 1800), then it exits by
itself. `make test-noisy` runs it beside `make test` to show the suite does not depend on an idle machine."""

from __future__ import annotations

import sys
import time


def spin(seconds: float) -> int:
    deadline = time.monotonic() + seconds
    spins = 0
    while time.monotonic() < deadline:
        for _ in range(100_000):
            spins += 1
    return spins


if __name__ == "__main__":
    spin(float(sys.argv[1]) if len(sys.argv) > 1 else 1800.0)
