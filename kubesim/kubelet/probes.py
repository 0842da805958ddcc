"""A container's probes as the kubelet's prober runs them: HTTP GET and TCP against the pod's IP, from inside
the pod's network namespace, with `initialDelaySeconds`, `periodSeconds`, `timeoutSeconds` and the success
and failure thresholds. Startup gates the others; readiness sets the container's `ready`; liveness and a
failed startup kill the container, to be restarted."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kubesim.kubelet.pod_status import Container
from kubesim.kubelet.proxy import connect_in

Probe = dict[str, Any]


@dataclass
class Prober:
    container: Container
    netns: int | None
    ip: str
    changed: Callable[[], None]  # the container's ready or started changed
    unhealthy: Callable[[str], None]  # an `Unhealthy` event
    kill: Callable[[str], Awaitable[None]]  # the container is to be restarted, and why

    async def run(self) -> None:
        spec = self.container.spec
        if "startupProbe" in spec:
            if not await self._until_success(spec["startupProbe"], "Startup"):
                return
            self.container.started = True
            self.changed()
        loops = [self._readiness(spec.get("readinessProbe"))]
        if "livenessProbe" in spec:
            loops.append(self._liveness(spec["livenessProbe"]))
        await asyncio.gather(*loops)

    async def _until_success(self, probe: Probe, kind: str) -> bool:
        await asyncio.sleep(_seconds(probe, "initialDelaySeconds", 0))
        failures = 0
        while True:
            ok, why = await self.once(probe)
            if ok:
                return True
            failures += 1
            if failures >= _count(probe, "failureThreshold", 3):
                await self.kill(f"{kind} probe failed: {why}")
                return False
            await asyncio.sleep(_seconds(probe, "periodSeconds", 10))

    async def _readiness(self, probe: Probe | None) -> None:
        if probe is None:
            self.container.ready = True
            self.changed()
            return
        await asyncio.sleep(_seconds(probe, "initialDelaySeconds", 0))
        successes = failures = 0
        while True:
            ok, why = await self.once(probe)
            successes, failures = (successes + 1, 0) if ok else (0, failures + 1)
            ready = self.container.ready
            if ok and successes >= _count(probe, "successThreshold", 1):
                ready = True
            if not ok and failures >= _count(probe, "failureThreshold", 3):
                ready = False
            if not ok and failures == 1:
                self.unhealthy(f"Readiness probe failed: {why}")
            if ready != self.container.ready:
                self.container.ready = ready
                self.changed()
            await asyncio.sleep(_seconds(probe, "periodSeconds", 10))

    async def _liveness(self, probe: Probe) -> None:
        await asyncio.sleep(_seconds(probe, "initialDelaySeconds", 0))
        failures = 0
        while True:
            ok, why = await self.once(probe)
            failures = 0 if ok else failures + 1
            if failures >= _count(probe, "failureThreshold", 3):
                await self.kill(f"Liveness probe failed: {why}")
                return
            await asyncio.sleep(_seconds(probe, "periodSeconds", 10))

    async def once(self, probe: Probe) -> tuple[bool, str]:
        """One probe: (passed, why not)."""
        try:
            async with asyncio.timeout(_seconds(probe, "timeoutSeconds", 1)):
                return await self._attempt(probe)
        except TimeoutError:
            return False, "context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
        except (OSError, ValueError) as exc:
            return False, str(exc)

    async def _attempt(self, probe: Probe) -> tuple[bool, str]:
        if "tcpSocket" not in probe and "httpGet" not in probe:
            kinds = ", ".join(k for k in probe if k in ("exec", "grpc"))
            return False, f"kubesim runs no {kinds} probes"
        check = probe.get("tcpSocket") or probe["httpGet"]
        host, port = check.get("host") or self.ip, self.port(check["port"])
        reader, writer = await connect_in(self.netns, (host, port))
        # Closed however the attempt ends: the probe's timeout cancels it mid-request, and a connection
        # left open would hold a socket until the collector finds it.
        try:
            if "tcpSocket" in probe:
                return True, ""
            return await _http_get(reader, writer, check=check, authority=f"{host}:{port}")
        finally:
            writer.close()

    def port(self, port: int | str) -> int:
        """A probe's port: a number, or the name of one of the container's ports."""
        if isinstance(port, int) or str(port).isdigit():
            return int(port)
        for declared in self.container.spec.get("ports") or []:
            if declared.get("name") == port:
                return int(declared["containerPort"])
        raise ValueError(f"port {port!r} is not a port of container {self.container.name}")


async def _http_get(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, check: Probe, authority: str
) -> tuple[bool, str]:
    headers = "".join(f"{h['name']}: {h['value']}\r\n" for h in check.get("httpHeaders") or [])
    request = (
        f"GET {check.get('path') or '/'} HTTP/1.1\r\nHost: {authority}\r\n"
        f"User-Agent: kube-probe/1.32\r\nAccept: */*\r\n{headers}Connection: close\r\n\r\n"
    )
    writer.write(request.encode())
    await writer.drain()
    status = (await reader.readline()).decode(errors="replace").split()
    code = int(status[1]) if len(status) > 1 and status[1].isdigit() else 0
    return 200 <= code < 400, f"HTTP probe failed with statuscode: {code}"


def _seconds(probe: Probe, key: str, default: float) -> float:
    return float(probe.get(key) or default)


def _count(probe: Probe, key: str, default: int) -> int:
    return int(probe.get(key) or default)
