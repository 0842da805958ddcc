"""One container of a pod kubesim runs, through its starts: the environment and mounts the kubelet gives
it, the sandbox process that execs it, its probes, its end (terminated state, exit code), and its restart
by `restartPolicy` with the kubelet's back-off; and SIGTERM-then-SIGKILL when it is to stop."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kubesim.apiserver.records import Obj, now_iso
from kubesim.kubelet import pod_files
from kubesim.kubelet.pod_env import ConfigError, Lookup, command_line, container_env, verify_run_as_non_root
from kubesim.kubelet.pod_status import HOST_IP, Container, restart_delay, restarts, terminated
from kubesim.kubelet.probes import Prober
from kubesim.kubelet.proxy import Forward
from kubesim.kubelet.service_links import service_env
from kubesim.options import ImageConfig

Key = tuple[str, str]
BACKOFF_RESET = 600.0  # a start that ran this long ends a crash streak (the kubelet's back-off resets)
RETRY_START, RETRY_MAX = 1.0, 30.0  # retries of what failed before a start (config, mounts) back off too


@dataclass
class PodRun:
    """A pod kubesim runs: its sandbox, its containers, and the tasks that keep them."""

    key: Key
    uid: str
    ip: str
    directory: Path
    containers: list[Container]
    grace: float = 30.0
    stopping: bool = False
    pause: asyncio.subprocess.Process | None = None
    netns: int | None = None
    forwards: list[Forward] = field(default_factory=list)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    done: asyncio.Event = field(default_factory=asyncio.Event)


class Host(Protocol):
    """What a container's loop needs of the runtime."""

    exits: dict[str, list[int]]
    last_words: dict[str, str]  # a failed container's termination message (its log's tail), by container

    def pod_of(self, run: PodRun) -> Obj | None: ...
    def image(self, pod: Obj) -> list[ImageConfig] | None: ...
    def lookup(self) -> Lookup: ...
    def services(self) -> Iterator[Obj]: ...
    def write_status(self, run: PodRun) -> None: ...
    def event(self, pod: Obj, kind: str, reason: str, message: str) -> None: ...


async def run_container(host: Host, run: PodRun, container: Container) -> None:
    """Start the container, and again after each end its restart policy restarts, until its pod stops."""
    index = run.containers.index(container)
    streak, retry = 0, RETRY_START  # crashes in a row, for the back-off
    while not run.stopping:
        pod = host.pod_of(run)
        images = host.image(pod) if pod is not None else None
        if pod is None or images is None:
            return
        try:
            env = environment(host, run, pod, container=container, image=images[index])
        except ConfigError as exc:
            container.state = {"waiting": {"reason": "CreateContainerConfigError", "message": str(exc)}}
            host.write_status(run)
            host.event(pod, "Warning", "Failed", message=f"Error: {exc}")
            await asyncio.sleep(retry)
            retry = min(retry * 2, RETRY_MAX)
            continue
        started = time.monotonic()
        log = await _start(host, run, pod, container=container, image=images[index], env=env)
        probes = asyncio.get_running_loop().create_task(_prober(host, run, container).run())
        assert container.process is not None
        code = await container.process.wait()
        await cancelled(probes)
        host.exits.setdefault(f"{run.key[0]}/{run.key[1]}/{container.name}", []).append(code)
        ended = terminated(
            code, container.state.get("running", {}).get("startedAt", now_iso()), log, spec=container.spec
        )
        if ended.get("message"):
            host.last_words[f"{run.key[0]}/{run.key[1]}/{container.name}"] = ended["message"]
        container.ready = False
        if run.stopping or not restarts(pod, ended["exitCode"]):
            container.state = {"terminated": ended}
            host.write_status(run)
            return
        container.last_state = {"terminated": ended}
        container.restarts += 1
        streak = 1 if time.monotonic() - started > BACKOFF_RESET else streak + 1
        delay = restart_delay(streak)
        pod_ref = f"{run.key[1]}_{run.key[0]}({run.uid})"
        message = f"back-off {delay:.0f}s restarting failed container={container.name} pod={pod_ref}"
        container.state = {"waiting": {"reason": "CrashLoopBackOff", "message": message}}
        host.write_status(run)
        host.event(
            pod, "Warning", "BackOff", message="Back-off restarting failed container " + container.name
        )
        await asyncio.sleep(delay)


async def _start(
    host: Host, run: PodRun, pod: Obj, *, container: Container, image: ImageConfig, env: dict[str, str]
) -> Path:
    """One start: the sandbox process that joins the pod's namespaces and execs the command. Returns the
    log it writes to (the previous start's is kept for `kubectl logs --previous`)."""
    spec_path = run.directory / f"{container.name}.json"
    sandbox = run.pause.pid if run.pause else 0
    spec = {
        "netns": f"/proc/{sandbox}/ns/net",
        "utsns": f"/proc/{sandbox}/ns/uts",
        "scratch": str(run.directory / f"{container.name}.scratch"),
        "mounts": mounts(run, pod, container),
        "argv": command_line(container.spec, image, env),
        "env": env,
        "workingDir": container.spec.get("workingDir") or image.working_dir,
    }
    spec_path.write_text(json.dumps(spec))
    (run.directory / f"{container.name}.scratch").mkdir(exist_ok=True)
    log = run.directory / f"{container.name}.log"
    if log.exists():
        log.replace(run.directory / f"{container.name}.previous.log")
    with log.open("ab") as output:
        container.process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "kubesim.kubelet.sandbox", "container", str(spec_path),
            stdout=output, stderr=output, stdin=asyncio.subprocess.DEVNULL,
            start_new_session=True, env=helper_env(),
        )  # fmt: skip
    container.state = {"running": {"startedAt": now_iso()}}
    container.started = "startupProbe" not in container.spec
    container.ready = False
    host.write_status(run)
    host.event(pod, "Normal", "Started", message=f"Started container {container.name}")
    return log


def _prober(host: Host, run: PodRun, container: Container) -> Prober:
    def unhealthy(message: str) -> None:
        pod = host.pod_of(run)
        if pod is not None:
            host.event(pod, "Warning", "Unhealthy", message=message)

    async def kill(why: str) -> None:
        """A failed liveness or startup probe: the container stops, and its loop starts it again."""
        unhealthy(why)
        pod = host.pod_of(run)
        if pod is not None:
            what = why.split(":", maxsplit=1)[0].lower()
            host.event(
                pod, "Normal", "Killing", message=f"Container {container.name} {what}, will be restarted"
            )
        await stop_container(container, run.grace)

    return Prober(container, run.netns, run.ip, lambda: host.write_status(run), unhealthy, kill)


def environment(
    host: Host, run: PodRun, pod: Obj, *, container: Container, image: ImageConfig
) -> dict[str, str]:
    """The image's ENV, what the runtime sets (HOSTNAME, HOME), then what the kubelet builds."""
    verify_run_as_non_root(pod, container.spec, image)
    pod = copy.deepcopy(pod)
    status = pod.setdefault("status", {})
    status.setdefault("podIP", run.ip)
    status.setdefault("hostIP", HOST_IP)
    built = container_env(pod, container.spec, service_env(pod, host.services()), lookup=host.lookup())
    return {**image.env, "HOSTNAME": pod_files.hostname(pod), "HOME": "/root", **built}


def mounts(run: PodRun, pod: Obj, container: Container) -> list[dict[str, Any]]:
    """The kubelet's files, then the container's volume mounts, as the sandbox mounts them."""
    volumes = {v["name"]: v for v in pod["spec"].get("volumes") or []}
    etc = run.directory / "etc"
    out: list[dict[str, Any]] = [
        {"source": str(etc / name), "target": f"/etc/{name}"} for name in ("hosts", "hostname", "resolv.conf")
    ]
    for mount in container.spec.get("volumeMounts") or []:
        volume = volumes[mount["name"]]
        source = run.directory / "volumes" / mount["name"]
        if "hostPath" in volume:
            source = Path(volume["hostPath"]["path"])
        if mount.get("subPath"):
            source = source / mount["subPath"]
        out.append(
            {"source": str(source), "target": mount["mountPath"], "readOnly": bool(mount.get("readOnly"))}
        )
    return out


async def stop_container(container: Container, grace: float) -> None:
    """SIGTERM, then SIGKILL to its process group once `grace` seconds have passed."""
    process = container.process
    if process is None or process.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(signal.SIGTERM)
    try:
        async with asyncio.timeout(grace):
            await process.wait()
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)


def helper_env() -> dict[str, str]:
    """The environment of kubesim's own helper (the sandbox), before it execs the container: the path only."""
    return {"PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")}


async def cancelled(task: asyncio.Task[Any]) -> None:
    if task is asyncio.current_task():
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
