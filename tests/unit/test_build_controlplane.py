"""`make controlplane` on a machine that cannot build it: one line naming what is missing, and exit 2."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from podherd.realcluster.build import BUILD_SCRIPT


def build(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(BUILD_SCRIPT)], capture_output=True, text=True, env=env, timeout=120, check=False
    )


def test_without_go_it_says_so_in_one_line_and_exits_2(tmp_path: Path) -> None:
    done = build({"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "controlplane: Go is not on PATH (Go >= 1.26 builds the control plane; kubesim, the default engine,"
        " needs none)"
    ]
    assert done.stdout == ""


@pytest.mark.skipif(shutil.which("go") is None, reason="needs Go, to be refused a module")
def test_a_module_that_cannot_be_had_is_named_in_one_line_and_exits_2(tmp_path: Path) -> None:
    go = Path(str(shutil.which("go"))).parent
    env = {
        "PATH": f"{go}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "GOPROXY": "off",  # as a proxy that serves nothing: every module is refused
        "GOMODCACHE": str(tmp_path / "modules"),
        "GOCACHE": str(tmp_path / "build"),
        "PODHERD_CACHE": str(tmp_path / "cache"),
    }
    done = build(env)
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line.startswith("controlplane: module ") and "@v" in line
    assert "cannot be had from the Go module proxy" in line, line
    assert list((tmp_path / "cache").rglob("complete")) == []  # nothing half-built taken for built
