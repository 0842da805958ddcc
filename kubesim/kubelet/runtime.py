"""kubesim's container runtime: pods whose images kubesim was told how to run (`SimOptions.images`) run as
real processes, with what a kubelet gives a container.

Per pod: a sandbox (`kubesim.kubelet.sandbox pause`) holding a network namespace whose loopback address is the
pod's IP, the kubelet's /etc/hosts, /etc/hostname and /etc/resolv.conf, and the pod's volumes (ConfigMap,
Secret, downward API, projected ServiceAccount token). Per container: its own mount namespace in that
sandbox, the environment of `kubesim.kubelet.pod_env`, its probes run against the pod's IP, restarts by
`restartPolicy` with the kubelet's back-off, and on deletion SIGTERM, then SIGKILL once the grace period
is over. Its output is the container's log (`kubectl logs`).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import itertools
import logging
import os
import random
import shutil
import signal
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from kubesim.apiserver.records import Obj
from kubesim.apiserver.store import Store
from kubesim.kubelet import pod_files
from kubesim.kubelet.containers import (
    RETRY_MAX,
    RETRY_START,
    PodRun,
    cancelled,
    run_container,
    stop_container,
)
from kubesim.kubelet.pod_env import Lookup
from kubesim.kubelet.pod_network import PodNetwork
from kubesim.kubelet.pod_status import Container, with_status
from kubesim.options import ImageConfig, SimOptions

log = logging.getLogger("kubesim.kubelet.runtime")
Key = tuple[str, str]
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
POD_NET = "127.244"


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


class ProcessRuntime:
    def __init__(
        self,
        store: Store,
        options: SimOptions,
        token: Callable[[Obj, str, int, str], str],
        *,
        event: Callable[[Obj, str, str, str], None],
    ) -> None:
        self.store, self.options = store, options
        self._token, self.event = token, event
        self.changed: Callable[[Key], None] = lambda key: None  # the kubelet's: a pod's processes ended
        self.pods_rt = store.registry.core("pods")
        self.services_rt = store.registry.core("services")
        self.root = Path(tempfile.mkdtemp(prefix="kubesim-pods-"))
        self.runs: dict[Key, PodRun] = {}
        self.closing = False  # kubesim is stopping: no pod starts again
        self.exits: dict[str, list[int]] = {}  # "namespace/pod/container" -> each run's exit code
        self.last_words: dict[str, str] = {}  # "namespace/pod/container" -> its last failed run's message
        self.network = PodNetwork(options)

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

    def pod_of(self, run: PodRun) -> Obj | None:
        pod = self.store.find(self.pods_rt, *run.key)
        return pod if pod is not None and pod["metadata"]["uid"] == run.uid else None

    def lookup(self) -> Lookup:
        def lookup(plural: str, namespace: str, name: str) -> Obj | None:
            rt = self.store.registry.get("", "v1", plural)
            return self.store.find(rt, namespace, name) if rt is not None else None

        return lookup

    async def _run(self, run: PodRun) -> None:
        try:
            pod = self.pod_of(run)
            if pod is None:
                return
            retry = RETRY_START
            while not await self._mount(run, pod):
                await asyncio.sleep(retry)
                retry = min(retry * 2, RETRY_MAX)  # the kubelet backs off its retries too
                pod = self.pod_of(run)
                if pod is None or run.stopping:
                    return
            await self.network.sandbox(run, pod)
            self.write_status(run)
            run.tasks += [
                asyncio.get_running_loop().create_task(
                    run_container(self, run, c), name=f"{run.key} {c.name}"
                )
                for c in run.containers
            ]
        except Exception as exc:
            log.exception("pod %s/%s could not start", *run.key)
            pod = self.pod_of(run)
            if pod is not None:
                self.event(pod, "Warning", "FailedCreatePodSandBox", f"Failed to create pod sandbox: {exc}")

    async def _mount(self, run: PodRun, pod: Obj) -> bool:
        """The pod's volumes and the kubelet's files written; False (with a FailedMount event) if not yet."""
        try:
            pod_files.write_volumes(
                run.directory / "volumes", pod, self.lookup(), token=functools.partial(self._token, pod)
            )
        except pod_files.VolumeError as exc:
            self.event(pod, "Warning", "FailedMount", str(exc))
            return False
        services = {
            self.network.service_ips[(ns, name)]: pod_files.service_names(ns, name, run.key[0])
            for ns, name in self.network.service_ips
        }
        pod_files.write_etc(run.directory / "etc", pod, run.ip, services=services)
        return True

    def services(self) -> Iterator[Obj]:
        return self.store.objects(self.services_rt)

    # ----------------------------------------------------------------------------------------------------
    # Stopping

    async def _stop(self, run: PodRun) -> None:
        try:
            await asyncio.gather(*(stop_container(c, run.grace) for c in run.containers))
            for container in run.containers:
                if container.process is not None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(container.process.pid, signal.SIGKILL)
                    await container.process.wait()
            for task in run.tasks:
                await cancelled(task)
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

    def write_status(self, run: PodRun) -> None:
        pod = self.pod_of(run)
        if pod is None:
            return
        new = with_status(pod, run.ip, run.containers)
        if new != pod:
            self.store.put(self.pods_rt, new, "MODIFIED", old=pod)
