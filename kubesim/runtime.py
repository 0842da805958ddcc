"""kubesim's container runtime: pods whose images kubesim was told how to run (`SimOptions.images`) run as
real processes, with what a kubelet gives a container.

Per pod: a sandbox (`kubesim.sandbox pause`) holding a network namespace whose loopback address is the pod's
IP, the kubelet's /etc/hosts, /etc/hostname and /etc/resolv.conf, and the pod's volumes (ConfigMap,
Secret, downward API, projected ServiceAccount token). Per container: its own mount namespace in that
sandbox, the environment of `kubesim.pod_env`, its probes run against the pod's IP, restarts by
`restartPolicy` with the kubelet's back-off, and on deletion SIGTERM, then SIGKILL once the grace period
is over. Its output is the container's log (`kubectl logs`).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
import json
import logging
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubesim import pod_files, sandbox
from kubesim.options import ImageConfig, SimOptions
from kubesim.pod_env import ConfigError, Lookup, container_env, expand
from kubesim.proxy import Address, Forward, connect_in
from kubesim.service_links import service_env
from kubesim.store import Obj, Store, now_iso
from kubesim.tls import KUBERNETES_SERVICE_IP

log = logging.getLogger("kubesim.runtime")
Key = tuple[str, str]
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
POD_NET, SERVICE_NET = "127.244", "127.96"
BACKOFF_START, BACKOFF_MAX, BACKOFF_RESET = 10.0, 300.0, 600.0
_SANDBOX_TIMEOUT = 10.0
RETRY_START, RETRY_MAX = 1.0, 30.0


def _pod_ips() -> Iterator[str]:
    """Pod IPs for this process's runtimes, from a random point of 127.244.0.0/16 on: distinct within a
    process, and unlikely to meet another process's (two kubesims on one machine)."""
    start = random.randrange(1 << 16)
    for n in itertools.count():
        host = (start + n) % ((1 << 16) - 2) + 1
        yield f"{POD_NET}.{host >> 8}.{host & 255}"


_POD_IPS = _pod_ips()


def repository(image: str) -> str:
    """An image reference without its tag or digest."""
    image = image.split("@", 1)[0]
    slash = image.rfind("/")
    colon = image.rfind(":")
    return image[:colon] if colon > slash else image


@dataclass
class Container:
    spec: dict[str, Any]
    restarts: int = 0
    state: dict[str, Any] = field(default_factory=lambda: {"waiting": {"reason": "ContainerCreating"}})
    last_state: dict[str, Any] = field(default_factory=dict)
    ready: bool = False
    started: bool = False
    process: asyncio.subprocess.Process | None = None
    killed_by: str = ""

    @property
    def name(self) -> str:
        return str(self.spec["name"])


@dataclass
class PodRun:
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


class ProcessRuntime:
    def __init__(
        self,
        store: Store,
        options: SimOptions,
        token: Callable[[Obj, str, int, str], str],
        event: Callable[[Obj, str, str, str], None],
    ) -> None:
        self.store, self.options = store, options
        self._token, self._event = token, event
        self.changed: Callable[[Key], None] = lambda key: None  # the kubelet's: a pod's processes ended
        self.pods_rt = store.registry.get("", "v1", "pods")
        self.services_rt = store.registry.get("", "v1", "services")
        self.root = Path(tempfile.mkdtemp(prefix="kubesim-pods-"))
        self.runs: dict[Key, PodRun] = {}
        self.closing = False  # kubesim is stopping: no pod starts again
        self.exits: dict[str, list[int]] = {}  # "namespace/pod/container" -> each run's exit code
        self.api_address: Address = ("127.0.0.1", 0)
        # Service (namespace, name) -> its address in a pod's sandbox; `kubernetes` is the API server's.
        self.service_ips: dict[tuple[str, str], str] = {("default", "kubernetes"): KUBERNETES_SERVICE_IP}
        for index, (namespace, name) in enumerate(
            sorted({(ns, n) for ns, n, _ in options.service_backends()})
        ):
            self.service_ips[(namespace, name)] = f"{SERVICE_NET}.1.{index + 1}"

    # ----------------------------------------------------------------------------------------------------
    # What the kubelet asks

    def image(self, pod: Obj) -> list[ImageConfig] | None:
        """The image of each container when kubesim runs all of them, else None (a simulated pod)."""
        containers = (pod.get("spec") or {}).get("containers") or []
        images = [self.options.images.get(repository(c.get("image") or "")) for c in containers]
        return None if not images or None in images else images  # type: ignore[return-value]

    def start(self, pod: Obj) -> None:
        if self.closing:
            return
        meta = pod["metadata"]
        key = (meta["namespace"], meta["name"])
        ip = next(_POD_IPS)
        directory = self.root / f"{meta['namespace']}_{meta['name']}_{meta['uid']}"
        containers = [Container(copy.deepcopy(c)) for c in pod["spec"]["containers"]]
        run = PodRun(key, meta["uid"], ip, directory, containers)
        self.runs[key] = run
        run.tasks.append(asyncio.get_running_loop().create_task(self._run(run), name=f"pod {key}"))

    def terminate(self, key: Key, grace: float) -> None:
        run = self.runs.get(key)
        if run is not None and not run.stopping:
            run.grace, run.stopping = grace, True
            asyncio.get_running_loop().create_task(self._stop(run), name=f"stop {key}")

    def finished(self, key: Key) -> bool:
        return key not in self.runs

    def log(self, pod: Obj, container: str, previous: bool = False) -> bytes | None:
        """What the container's current (or previous) start wrote, while its pod runs here; else None."""
        run = self.runs.get((pod["metadata"]["namespace"], pod["metadata"]["name"]))
        if run is None or run.uid != pod["metadata"]["uid"]:
            return None
        path = run.directory / f"{container}.{'previous.' if previous else ''}log"
        return path.read_bytes() if path.exists() else None

    async def close(self) -> None:
        """Every pod stopped as on deletion (kubesim is stopping), then the pods' files removed."""
        self.closing = True
        for run in list(self.runs.values()):
            self.terminate(run.key, run.grace)
        for run in list(self.runs.values()):
            await run.done.wait()
        shutil.rmtree(self.root, ignore_errors=True)

    # ----------------------------------------------------------------------------------------------------
    # A pod's life

    def _pod(self, run: PodRun) -> Obj | None:
        assert self.pods_rt is not None
        pod = self.store.find(self.pods_rt, *run.key)
        return pod if pod is not None and pod["metadata"]["uid"] == run.uid else None

    def _lookup(self) -> Lookup:
        def lookup(plural: str, namespace: str, name: str) -> Obj | None:
            rt = self.store.registry.get("", "v1", plural)
            return self.store.find(rt, namespace, name) if rt is not None else None

        return lookup

    async def _run(self, run: PodRun) -> None:
        try:
            pod = self._pod(run)
            if pod is None:
                return
            retry = RETRY_START
            while not await self._mount(run, pod):
                await asyncio.sleep(retry)
                retry = min(retry * 2, RETRY_MAX)  # the kubelet backs off its retries too
                pod = self._pod(run)
                if pod is None or run.stopping:
                    return
            await self._sandbox(run, pod)
            self._write_status(run)
            run.tasks += [
                asyncio.get_running_loop().create_task(self._container(run, c), name=f"{run.key} {c.name}")
                for c in run.containers
            ]
        except Exception as exc:
            log.exception("pod %s/%s could not start", *run.key)
            pod = self._pod(run)
            if pod is not None:
                self._event(pod, "Warning", "FailedCreatePodSandBox", f"Failed to create pod sandbox: {exc}")

    async def _mount(self, run: PodRun, pod: Obj) -> bool:
        volumes = run.directory / "volumes"
        for volume in pod["spec"].get("volumes") or []:
            target = volumes / volume["name"]
            try:
                if "emptyDir" in volume:
                    target.mkdir(parents=True, exist_ok=True)
                elif "hostPath" in volume:
                    continue
                else:
                    token = self._token_for(pod)
                    files = pod_files.volume_files(pod, volume, self._lookup(), token)
                    pod_files.atomic_write(target, files)
            except (pod_files.MountError, ConfigError) as exc:
                message = f'MountVolume.SetUp failed for volume "{volume["name"]}" : {exc}'
                self._event(pod, "Warning", "FailedMount", message)
                return False
        etc = run.directory / "etc"
        etc.mkdir(parents=True, exist_ok=True)
        services = {
            self.service_ips[(ns, name)]: pod_files.service_names(ns, name, run.key[0])
            for ns, name in self.service_ips
        }
        (etc / "hosts").write_text(pod_files.hosts_file(pod, run.ip, services))
        (etc / "hostname").write_text(pod_files.hostname(pod) + "\n")
        (etc / "resolv.conf").write_text(pod_files.resolv_conf(run.key[0]))
        return True

    def _token_for(self, pod: Obj) -> pod_files.Token:
        def token(account: str, seconds: int, audience: str) -> str:
            return self._token(pod, account, seconds, audience)

        return token

    async def _sandbox(self, run: PodRun, pod: Obj) -> None:
        spec = run.directory / "sandbox.json"
        spec.write_text(json.dumps({"hostname": pod_files.hostname(pod)}))
        run.pause = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "kubesim.sandbox", "pause", str(spec),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            stdin=asyncio.subprocess.DEVNULL, start_new_session=True, env=_python_env(),
        )  # fmt: skip
        assert run.pause.stdout is not None
        async with asyncio.timeout(_SANDBOX_TIMEOUT):
            line = await run.pause.stdout.readline()
        if line.strip() != b"ready":
            rest = await run.pause.stdout.read()
            raise OSError((line + rest).decode(errors="replace").strip() or "the sandbox ended")
        run.netns = os.open(f"/proc/{run.pause.pid}/ns/net", os.O_RDONLY)
        for container in run.containers:
            for port in container.spec.get("ports") or []:
                number = int(port["containerPort"])
                run.forwards.append(Forward(None, (run.ip, number), run.netns, [(run.ip, number)]))
        backends = self.options.service_backends()
        for (namespace, name), ip in self.service_ips.items():
            if (namespace, name) == ("default", "kubernetes"):
                run.forwards.append(Forward(run.netns, (ip, 443), None, [self.api_address]))
                continue
            for ns, svc, port in backends:
                if (ns, svc) == (namespace, name):
                    targets = self.options.backends(ns, svc, port)
                    run.forwards.append(Forward(run.netns, (ip, port), None, targets))
        for forward in run.forwards:
            await forward.start()

    def _argv(self, container: Container, image: ImageConfig, env: dict[str, str]) -> list[str]:
        command = container.spec.get("command")
        args = container.spec.get("args")
        argv = (
            list(command)
            if command
            else list(image.entrypoint) + list(args if args is not None else image.cmd)
        )
        if command:
            argv += list(args or [])
        return [expand(a, env) for a in argv]

    def _mounts(self, run: PodRun, pod: Obj, container: Container) -> list[dict[str, Any]]:
        volumes = {v["name"]: v for v in pod["spec"].get("volumes") or []}
        etc = run.directory / "etc"
        mounts: list[dict[str, Any]] = [
            {"source": str(etc / name), "target": f"/etc/{name}"}
            for name in ("hosts", "hostname", "resolv.conf")
        ]
        for mount in container.spec.get("volumeMounts") or []:
            volume = volumes[mount["name"]]
            source = run.directory / "volumes" / mount["name"]
            if "hostPath" in volume:
                source = Path(volume["hostPath"]["path"])
            if mount.get("subPath"):
                source = source / mount["subPath"]
            mounts.append(
                {"source": str(source), "target": mount["mountPath"], "readOnly": bool(mount.get("readOnly"))}
            )
        return mounts

    async def _container(self, run: PodRun, container: Container) -> None:
        index = run.containers.index(container)
        images = None
        backoff, retry = 0.0, RETRY_START
        while not run.stopping:
            pod = self._pod(run)
            images = self.image(pod) if pod is not None else None
            if pod is None or images is None:
                return
            try:
                env = self._env(run, pod, container, images[index])
            except ConfigError as exc:
                container.state = {"waiting": {"reason": "CreateContainerConfigError", "message": str(exc)}}
                self._write_status(run)
                self._event(pod, "Warning", "Failed", f"Error: {exc}")
                await asyncio.sleep(retry)
                retry = min(retry * 2, RETRY_MAX)
                continue
            spec_path = run.directory / f"{container.name}.json"
            spec_path.write_text(
                json.dumps(
                    {
                        "netns": f"/proc/{run.pause.pid if run.pause else 0}/ns/net",
                        "utsns": f"/proc/{run.pause.pid if run.pause else 0}/ns/uts",
                        "scratch": str(run.directory / f"{container.name}.scratch"),
                        "mounts": self._mounts(run, pod, container),
                        "argv": self._argv(container, images[index], env),
                        "env": env,
                        "workingDir": container.spec.get("workingDir") or images[index].working_dir,
                    }
                )
            )
            (run.directory / f"{container.name}.scratch").mkdir(exist_ok=True)
            started = time.monotonic()
            current = run.directory / f"{container.name}.log"
            if current.exists():
                current.replace(run.directory / f"{container.name}.previous.log")
            with current.open("ab") as output:
                container.process = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "kubesim.sandbox", "container", str(spec_path),
                    stdout=output, stderr=output, stdin=asyncio.subprocess.DEVNULL,
                    start_new_session=True, env=_python_env(),
                )  # fmt: skip
            container.killed_by = ""
            container.state = {"running": {"startedAt": now_iso()}}
            container.started = "startupProbe" not in container.spec
            container.ready = False
            self._write_status(run)
            self._event(pod, "Normal", "Started", f"Started container {container.name}")
            probes = asyncio.get_running_loop().create_task(self._probe_all(run, container))
            code = await container.process.wait()
            await _cancelled(probes)
            self.exits.setdefault(f"{run.key[0]}/{run.key[1]}/{container.name}", []).append(code)
            terminated = {
                "exitCode": code if code >= 0 else 128 - code,
                "reason": "Completed" if code == 0 else "Error",
                "startedAt": container.state.get("running", {}).get("startedAt", now_iso()),
                "finishedAt": now_iso(),
            }
            failed_start = _start_error(code, run.directory / f"{container.name}.log")
            if failed_start:
                terminated.update(reason="StartError", message=failed_start)
            container.ready = False
            if run.stopping or not _restarts(pod, terminated["exitCode"]):
                container.state = {"terminated": terminated}
                self._write_status(run)
                return
            container.last_state = {"terminated": terminated}
            container.restarts += 1
            backoff = (
                0.0
                if time.monotonic() - started > BACKOFF_RESET
                else max(BACKOFF_START, backoff * 2)
                if backoff
                else BACKOFF_START
            )
            backoff = min(backoff, BACKOFF_MAX)
            pod_ref = f"{run.key[1]}_{run.key[0]}({run.uid})"
            message = f"back-off {backoff:.0f}s restarting failed container={container.name} pod={pod_ref}"
            container.state = {"waiting": {"reason": "CrashLoopBackOff", "message": message}}
            self._write_status(run)
            self._event(pod, "Warning", "BackOff", "Back-off restarting failed container " + container.name)
            await asyncio.sleep(backoff if container.restarts > 1 else 0.0)

    def _env(self, run: PodRun, pod: Obj, container: Container, image: ImageConfig) -> dict[str, str]:
        verify_run_as_non_root(pod, container.spec, image)
        pod = copy.deepcopy(pod)
        status = pod.setdefault("status", {})
        status.setdefault("podIP", run.ip)
        status.setdefault("hostIP", "127.0.0.1")
        assert self.services_rt is not None
        links = service_env(pod, self.store.objects(self.services_rt))
        built = container_env(pod, container.spec, links, self._lookup())
        return {**image.env, "HOSTNAME": pod_files.hostname(pod), "HOME": "/root", **built}

    # ----------------------------------------------------------------------------------------------------
    # Probes

    async def _probe_all(self, run: PodRun, container: Container) -> None:
        spec = container.spec
        if "startupProbe" in spec:
            if not await self._probe_until(run, container, spec["startupProbe"], "Startup"):
                return
            container.started = True
            self._write_status(run)
        loops = [self._readiness(run, container, spec.get("readinessProbe"))]
        if "livenessProbe" in spec:
            loops.append(self._liveness(run, container, spec["livenessProbe"]))
        await asyncio.gather(*loops)

    async def _probe_until(self, run: PodRun, container: Container, probe: dict[str, Any], kind: str) -> bool:
        """Startup: probe until it passes (True) or fails `failureThreshold` times, then restart (False)."""
        await asyncio.sleep(float(probe.get("initialDelaySeconds") or 0))
        failures = 0
        while True:
            ok, why = await self._probe(run, container, probe)
            if ok:
                return True
            failures += 1
            if failures >= int(probe.get("failureThreshold") or 3):
                await self._kill_for(run, container, f"{kind} probe failed: {why}")
                return False
            await asyncio.sleep(float(probe.get("periodSeconds") or 10))

    async def _readiness(self, run: PodRun, container: Container, probe: dict[str, Any] | None) -> None:
        if probe is None:
            container.ready = True
            self._write_status(run)
            return
        await asyncio.sleep(float(probe.get("initialDelaySeconds") or 0))
        successes = failures = 0
        while True:
            ok, why = await self._probe(run, container, probe)
            successes, failures = (successes + 1, 0) if ok else (0, failures + 1)
            ready = container.ready
            if ok and successes >= int(probe.get("successThreshold") or 1):
                ready = True
            if not ok and failures >= int(probe.get("failureThreshold") or 3):
                ready = False
            if not ok and container.ready is False and failures == 1:
                self._warn(run, f"Readiness probe failed: {why}")
            if ready != container.ready:
                container.ready = ready
                self._write_status(run)
            await asyncio.sleep(float(probe.get("periodSeconds") or 10))

    async def _liveness(self, run: PodRun, container: Container, probe: dict[str, Any]) -> None:
        await asyncio.sleep(float(probe.get("initialDelaySeconds") or 0))
        failures = 0
        while True:
            ok, why = await self._probe(run, container, probe)
            failures = 0 if ok else failures + 1
            if failures >= int(probe.get("failureThreshold") or 3):
                await self._kill_for(run, container, f"Liveness probe failed: {why}")
                return
            await asyncio.sleep(float(probe.get("periodSeconds") or 10))

    def _warn(self, run: PodRun, message: str) -> None:
        pod = self._pod(run)
        if pod is not None:
            self._event(pod, "Warning", "Unhealthy", message)

    async def _kill_for(self, run: PodRun, container: Container, why: str) -> None:
        self._warn(run, why)
        pod = self._pod(run)
        if pod is not None:
            self._event(
                pod,
                "Normal",
                "Killing",
                f"Container {container.name} {why.split(':', maxsplit=1)[0].lower()}, will be restarted",
            )
        container.killed_by = why
        await self._stop_container(container, run.grace)

    def _port(self, container: Container, port: int | str) -> int:
        if isinstance(port, int) or str(port).isdigit():
            return int(port)
        for declared in container.spec.get("ports") or []:
            if declared.get("name") == port:
                return int(declared["containerPort"])
        raise ValueError(f"port {port!r} is not a port of container {container.name}")

    async def _probe(self, run: PodRun, container: Container, probe: dict[str, Any]) -> tuple[bool, str]:
        timeout = float(probe.get("timeoutSeconds") or 1)
        try:
            async with asyncio.timeout(timeout):
                return await self._probe_once(run, container, probe)
        except TimeoutError:
            return False, "context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
        except (OSError, ValueError) as exc:
            return False, str(exc)

    async def _probe_once(self, run: PodRun, container: Container, probe: dict[str, Any]) -> tuple[bool, str]:
        if "tcpSocket" in probe:
            check = probe["tcpSocket"]
            address = (check.get("host") or run.ip, self._port(container, check["port"]))
            _, writer = await connect_in(run.netns, address)
            writer.close()
            return True, ""
        if "httpGet" not in probe:
            return (
                False,
                f"kubesim runs no {', '.join(k for k in probe if k.endswith(('exec', 'grpc')))} probes",
            )
        check = probe["httpGet"]
        host, port = check.get("host") or run.ip, self._port(container, check["port"])
        reader, writer = await connect_in(run.netns, (host, port))
        headers = "".join(f"{h['name']}: {h['value']}\r\n" for h in check.get("httpHeaders") or [])
        request = (
            f"GET {check.get('path') or '/'} HTTP/1.1\r\nHost: {host}:{port}\r\n"
            "User-Agent: kube-probe/1.32\r\n"
            f"Accept: */*\r\n{headers}Connection: close\r\n\r\n"
        )
        writer.write(request.encode())
        await writer.drain()
        status = (await reader.readline()).decode(errors="replace").split()
        writer.close()
        code = int(status[1]) if len(status) > 1 and status[1].isdigit() else 0
        return 200 <= code < 400, f"HTTP probe failed with statuscode: {code}"

    # ----------------------------------------------------------------------------------------------------
    # Stopping

    async def _stop_container(self, container: Container, grace: float) -> None:
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

    async def _stop(self, run: PodRun) -> None:
        try:
            await asyncio.gather(*(self._stop_container(c, run.grace) for c in run.containers))
            for container in run.containers:
                if container.process is not None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(container.process.pid, signal.SIGKILL)
                    await container.process.wait()
            for task in run.tasks:
                await _cancelled(task)
            for forward in run.forwards:
                await forward.stop()
            if run.pause is not None:
                with contextlib.suppress(ProcessLookupError):
                    run.pause.kill()
                await run.pause.wait()
            if run.netns is not None:
                os.close(run.netns)
            shutil.rmtree(run.directory, ignore_errors=True)
        finally:
            self.runs.pop(run.key, None)
            run.done.set()
            self.changed(run.key)

    # ----------------------------------------------------------------------------------------------------
    # Status

    def _write_status(self, run: PodRun) -> None:
        pod = self._pod(run)
        if pod is None:
            return
        assert self.pods_rt is not None
        new = copy.deepcopy(pod)
        status = new.setdefault("status", {})
        status.update(
            podIP=run.ip, podIPs=[{"ip": run.ip}], hostIP="127.0.0.1", hostIPs=[{"ip": "127.0.0.1"}]
        )
        status.setdefault("startTime", now_iso())
        statuses = []
        for container in run.containers:
            entry: dict[str, Any] = {
                "name": container.name,
                "image": container.spec.get("image", ""),
                "imageID": "",
                "ready": container.ready,
                "started": container.started and "running" in container.state,
                "restartCount": container.restarts,
                "state": container.state,
            }
            if container.last_state:
                entry["lastState"] = container.last_state
            statuses.append(entry)
        status["containerStatuses"] = statuses
        states = [c.state for c in run.containers]
        policy = pod["spec"].get("restartPolicy") or "Always"
        if all("terminated" in s for s in states) and policy != "Always":
            failed = any(s["terminated"]["exitCode"] != 0 for s in states)
            status["phase"] = "Failed" if failed else "Succeeded"
        elif any("running" in s for s in states) or any(c.restarts for c in run.containers):
            status["phase"] = "Running"
        else:
            status["phase"] = "Pending"
        ready = all(c.ready for c in run.containers)
        pod_conditions(status, ready)
        if new != pod:
            self.store.put(self.pods_rt, new, "MODIFIED", old=pod)


def pod_conditions(status: Obj, ready: bool) -> None:
    stamp = now_iso()
    value = "True" if ready else "False"
    previous = {c["type"]: c for c in status.get("conditions") or []}
    wanted = {"PodScheduled": "True", "Initialized": "True", "ContainersReady": value, "Ready": value}
    conditions = []
    for kind, state in wanted.items():
        old = previous.get(kind)
        changed = old is None or old.get("status") != state
        stamp_kept = stamp if changed else old.get("lastTransitionTime", stamp)  # type: ignore[union-attr]
        conditions.append({"type": kind, "status": state, "lastTransitionTime": stamp_kept})
    status["conditions"] = conditions


def verify_run_as_non_root(pod: Obj, container: Obj, image: ImageConfig) -> None:
    """The kubelet's check of `runAsNonRoot` against the user the container would run as."""
    pod_context = pod["spec"].get("securityContext") or {}
    context = container.get("securityContext") or {}
    if not context.get("runAsNonRoot", pod_context.get("runAsNonRoot")):
        return
    meta = pod["metadata"]
    where = f'(pod: "{meta["name"]}_{meta["namespace"]}({meta["uid"]})", container: {container["name"]})'
    user = context.get("runAsUser", pod_context.get("runAsUser"))
    if user is not None:
        if int(user) == 0:
            raise ConfigError(f"container's runAsUser breaks non-root policy {where}")
        return
    if not image.user.isdigit():
        raise ConfigError(
            f"container has runAsNonRoot and image has non-numeric user ({image.user}), cannot verify user is"
            f" non-root {where}"
        )
    if int(image.user) == 0:
        raise ConfigError(f"container has runAsNonRoot and image will run as root {where}")


def _python_env() -> dict[str, str]:
    """The environment of kubesim's own helper (the sandbox), before it execs the container: the path only."""
    return {"PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")}


def _restarts(pod: Obj, exit_code: int) -> bool:
    policy = pod["spec"].get("restartPolicy") or "Always"
    return policy == "Always" or (policy == "OnFailure" and exit_code != 0)


def _start_error(code: int, log_file: Path) -> str:
    """The runtime's message when the container never started (the sandbox's last word), else ""."""
    if code == sandbox.START_ERROR:
        with contextlib.suppress(OSError, IndexError):
            last = log_file.read_text(errors="replace").rstrip().splitlines()[-1]
            if last.startswith("kubesim: "):
                return last.removeprefix("kubesim: ")
    return ""


async def _cancelled(task: asyncio.Task[Any]) -> None:
    if task is asyncio.current_task():
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
