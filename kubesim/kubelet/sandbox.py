"""What kubesim's container runtime runs before a pod's own program (`python -m kubesim.kubelet.sandbox MODE
SPEC`).

- `pause SPEC`: the pod's sandbox, as a real runtime's pause container: a network namespace whose `lo` is up
  (so the pod's loopback address is its own), a UTS namespace named after the pod; prints `ready` and
  sleeps until it is killed. The pod's containers join both, so they survive a container's restart.
- `container SPEC`: one start of a container: joins the sandbox's namespaces, takes a mount namespace of
  its own in which the pod's volumes and the kubelet's files (/etc/hosts, ...) are mounted at their paths,
  then execs the container's command with exactly the environment the kubelet built.

A directory that a mount needs but the host lacks (/etc/podherd) is made in an overlay over its parent,
inside the container's mount namespace: the host's file system is never written.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from kubesim.kubelet import linux

START_ERROR = 128  # the exit code of a container whose start failed (the runtime's StartError)


def pause(spec: dict[str, Any]) -> None:
    linux.unshare(linux.CLONE_NEWNET | linux.CLONE_NEWUTS)
    linux.loopback_up()
    linux.sethostname(spec["hostname"])
    linux.die_with_parent(signal.SIGKILL)
    print("ready", flush=True)
    while True:
        signal.pause()


def _existing_ancestor(target: str) -> str:
    path = target
    while not os.path.lexists(path):
        path = os.path.dirname(path)
    return os.path.realpath(path)


def _overlay(directory: str, scratch: Path, index: int) -> None:
    upper, work = scratch / f"{index}" / "upper", scratch / f"{index}" / "work"
    upper.mkdir(parents=True)
    work.mkdir(parents=True)
    linux.mount(
        "overlay", directory, "overlay", flags=0, data=f"lowerdir={directory},upperdir={upper},workdir={work}"
    )


def mount_all(mounts: list[dict[str, Any]], scratch: Path) -> None:
    linux.mount("none", "/", None, flags=linux.MS_REC | linux.MS_PRIVATE)
    linux.mount("tmpfs", str(scratch), "tmpfs", flags=linux.MS_NOSUID | linux.MS_NODEV, data="mode=0700")
    overlaid: list[str] = []
    for item in mounts:
        if os.path.lexists(item["target"]):
            continue
        parent = _existing_ancestor(item["target"])
        if parent == "/":
            raise OSError(
                f"cannot make {item['target']}: kubesim makes a mount's directory only below one that exists"
            )
        if not any(parent == done or parent.startswith(done + "/") for done in overlaid):
            _overlay(parent, scratch, len(overlaid))
            overlaid.append(parent)
    for item in mounts:
        target = item["target"]
        if os.path.isdir(item["source"]):
            os.makedirs(target, exist_ok=True)
        elif not os.path.lexists(target):
            os.makedirs(os.path.dirname(target), exist_ok=True)
            Path(target).touch()
        linux.bind(item["source"], target, bool(item.get("readOnly")))


def container(spec: dict[str, Any]) -> None:
    for key, kind in (("netns", linux.CLONE_NEWNET), ("utsns", linux.CLONE_NEWUTS)):
        fd = os.open(spec[key], os.O_RDONLY)
        linux.setns(fd, kind)
        os.close(fd)
    linux.unshare(linux.CLONE_NEWNS)
    mount_all(spec["mounts"], Path(spec["scratch"]))
    linux.die_with_parent(signal.SIGKILL)
    os.chdir(spec.get("workingDir") or "/")
    argv, env = spec["argv"], spec["env"]
    try:
        os.execvpe(argv[0], argv, env)
    except FileNotFoundError:
        raise OSError(f'exec: "{argv[0]}": executable file not found in $PATH') from None


def main(argv: list[str]) -> int:
    mode, path = argv[1], argv[2]
    spec = json.loads(Path(path).read_text())
    try:
        if mode == "pause":
            pause(spec)
        else:
            container(spec)
    except OSError as exc:
        print(f"kubesim: {exc}", file=sys.stderr)
    return START_ERROR


if __name__ == "__main__":
    sys.exit(main(sys.argv))
