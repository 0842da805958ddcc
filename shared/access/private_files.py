"""Files that hold a secret (a token, a key, a password): made readable by their owner alone from the moment
they exist, never written first and narrowed after."""

from __future__ import annotations

import os
from pathlib import Path

PRIVATE = 0o600


def write_private(path: Path, data: bytes | str) -> Path:
    """Write `data` to `path` (created or replaced) with mode 0600."""
    raw = data.encode() if isinstance(data, str) else data
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE)
    try:
        os.fchmod(descriptor, PRIVATE)  # an older file keeps its mode through O_CREAT
        with os.fdopen(descriptor, "wb", closefd=False) as out:
            out.write(raw)
    finally:
        os.close(descriptor)
    return path
