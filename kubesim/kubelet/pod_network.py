"""A pod's network, as kubesim runs it: a sandbox process holding a network namespace whose loopback
address is the pod's IP; its containers' ports reachable at that IP from the host; and, inside it, each
Service kubesim knows at an address of its own (`kubernetes` at the API server's ClusterIP), forwarded to
its backends."""

from __future__ import annotations

import asyncio
import json
import os
import sys

from kubesim.apiserver.records import Obj
from kubesim.apiserver.serving import KUBERNETES_SERVICE_IP
from kubesim.kubelet import pod_files
from kubesim.kubelet.containers import PodRun, helper_env
from kubesim.kubelet.proxy import Address, Forward
from kubesim.options import SimOptions

SERVICE_NET = "127.96"
_SANDBOX_TIMEOUT = 10.0


class PodNetwork:
    def __init__(self, options: SimOptions) -> None:
        self.options = options
        self.api_address: Address = ("127.0.0.1", 0)
        # Service (namespace, name) -> its address in a pod's sandbox; `kubernetes` is the API server's.
        self.service_ips: dict[tuple[str, str], str] = {("default", "kubernetes"): KUBERNETES_SERVICE_IP}
        for index, (namespace, name) in enumerate(
            sorted({(ns, n) for ns, n, _ in options.service_backends()})
        ):
            self.service_ips[(namespace, name)] = f"{SERVICE_NET}.1.{index + 1}"

    async def sandbox(self, run: PodRun, pod: Obj) -> None:
        spec = run.directory / "sandbox.json"
        spec.write_text(json.dumps({"hostname": pod_files.hostname(pod)}))
        run.pause = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "kubesim.kubelet.sandbox", "pause", str(spec),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            stdin=asyncio.subprocess.DEVNULL, start_new_session=True, env=helper_env(),
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
                run.forwards.append(Forward(None, (run.ip, number), run.netns, targets=[(run.ip, number)]))
        backends = self.options.service_backends()
        for (namespace, name), ip in self.service_ips.items():
            if (namespace, name) == ("default", "kubernetes"):
                run.forwards.append(Forward(run.netns, (ip, 443), None, targets=[self.api_address]))
                continue
            for ns, svc, port in backends:
                if (ns, svc) == (namespace, name):
                    targets = self.options.backends(ns, svc, port)
                    run.forwards.append(Forward(run.netns, (ip, port), None, targets=targets))
        for forward in run.forwards:
            await forward.start()
