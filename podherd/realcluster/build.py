"""Where `make controlplane` put the real engine's binaries: the build script answers (building first when
its cache holds nothing for these go.mod files, this Go and these flags)."""

from __future__ import annotations

import subprocess
from pathlib import Path

BUILD_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "build_controlplane.sh"


class ControlPlaneUnavailable(RuntimeError):
    """Go, or a pinned module, cannot be had: the one line the build script said."""


def built() -> Path:
    """make controlplane's directory (bin/, crds/, kwok-stages/), built if it was not."""
    if not BUILD_SCRIPT.exists():
        raise ControlPlaneUnavailable(f"{BUILD_SCRIPT} is not here: the real engine runs from a checkout")
    done = subprocess.run(["bash", str(BUILD_SCRIPT)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        raise ControlPlaneUnavailable(lines[-1] if lines else f"{BUILD_SCRIPT} exited {done.returncode}")
    return Path(done.stdout.strip().splitlines()[-1]).parent
