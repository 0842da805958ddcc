"""The CLI: errors are one line and a non-zero exit, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from podherd.cli import main


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["version"]) == 0
    assert capsys.readouterr().out.startswith("podherd ")


def test_config_prints_effective_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("kind: MigrationControllerArgs\nmaxMigratingPerNode: 5\n")
    monkeypatch.setenv("NATS_URL", "nats://elsewhere:4222")
    assert main(["config", "--config", str(path)]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["migrationController"]["maxMigratingPerNode"] == 5
    assert shown["nats"]["url"] == "nats://elsewhere:4222"


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (None, "cannot read config file"),
        ("evictionPolicy: Evict\nkind: MigrationControllerArgs", "evictionPolicy"),
    ],
)
def test_config_errors_are_one_line(tmp_path: Path, content: str | None, needle: str) -> None:
    path = tmp_path / "c.yaml"
    if content is not None:
        path.write_text(content)
    result = subprocess.run(
        [sys.executable, "-m", "podherd", "config", "--config", str(path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and needle in result.stderr
    assert "Traceback" not in result.stderr
