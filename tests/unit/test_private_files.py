"""A file holding a secret is its owner's alone from the moment it exists, a file it replaces included."""

from __future__ import annotations

import stat
from pathlib import Path

from shared.access.private_files import write_private


def test_a_secret_is_written_readable_by_its_owner_alone(tmp_path: Path) -> None:
    made = write_private(tmp_path / "new" / "token", "s3cret")
    assert made.read_text() == "s3cret"
    assert stat.S_IMODE(made.stat().st_mode) == 0o600


def test_a_world_readable_file_replaced_by_a_secret_is_narrowed(tmp_path: Path) -> None:
    old = tmp_path / "key"
    old.write_text("a much longer public text than the key")
    old.chmod(0o644)
    write_private(old, b"key")
    assert old.read_bytes() == b"key"
    assert stat.S_IMODE(old.stat().st_mode) == 0o600
