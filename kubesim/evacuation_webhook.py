"""KubeVirt's eviction interceptor, as a small validating admission webhook of its own (a process kubesim
starts with `--evict-in-background`): an eviction of a pod annotated
`descheduler.alpha.kubernetes.io/request-evict-only` is denied with 429 `Eviction triggered evacuation of
VMI "<ns>/<name>"`, the pod marked `descheduler.alpha.kubernetes.io/eviction-in-progress` (unless a dry
run), and `Evacuation in progress: …` once it is marked; any other pod's eviction is allowed. The evacuation
itself (the pod deleted later) is kubesim's `Evacuator`.

    python -m kubesim.evacuation_webhook SPEC.json   # prints "ready PORT" once it listens

SPEC: {"serving_cert", "serving_key"} (its serving certificate), {"server", "ca", "client_cert",
"client_key"} (the API server and its own user there).
"""

from __future__ import annotations

import asyncio
import json
import signal
import ssl
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

REQUEST_EVICT_ONLY = "descheduler.alpha.kubernetes.io/request-evict-only"
EVICTION_IN_PROGRESS = "descheduler.alpha.kubernetes.io/eviction-in-progress"
NAME = "virt-launcher-eviction-interceptor.kubevirt.io"
PATH = "/virt-launcher-eviction-interceptor"


class Interceptor:
    """Reads and marks pods as its own user (a client certificate of the cluster's CA)."""

    def __init__(self, spec: dict[str, str]) -> None:
        self.server = spec["server"]
        self.context = ssl.create_default_context(cafile=spec["ca"])
        self.context.load_cert_chain(spec["client_cert"], spec["client_key"])
        self.headers: dict[str, str] = {}

    async def review(self, request: web.Request) -> web.Response:
        asked = (await request.json())["request"]
        namespace, name = asked["namespace"], asked["name"]
        path = f"{self.server}/api/v1/namespaces/{namespace}/pods/{name}"
        async with aiohttp.ClientSession(headers=self.headers) as session:
            async with session.get(path, ssl=self.context) as found:
                pod: dict[str, Any] = await found.json() if found.status == 200 else {}
            annotations = (pod.get("metadata") or {}).get("annotations") or {}
            answer: dict[str, Any] = {"uid": asked["uid"], "allowed": True}
            if REQUEST_EVICT_ONLY in annotations:
                triggered = f'Eviction triggered evacuation of VMI "{namespace}/{name}"'
                message = triggered
                if EVICTION_IN_PROGRESS in annotations:
                    message = f"Evacuation in progress: {triggered}"
                elif not asked.get("dryRun"):
                    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                    patch = {"metadata": {"annotations": {EVICTION_IN_PROGRESS: now}}}
                    headers = {"Content-Type": "application/merge-patch+json"}
                    async with session.patch(path, data=json.dumps(patch), headers=headers, ssl=self.context):
                        pass
                answer = {"uid": asked["uid"], "allowed": False, "status": {"code": 429, "message": message}}
        return web.json_response(
            {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": answer}
        )


async def serve(spec: dict[str, str]) -> None:
    interceptor = Interceptor(spec)
    app = web.Application()
    app.router.add_post(PATH, interceptor.review)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(spec["serving_cert"], spec["serving_key"])
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    server = site._server
    assert isinstance(server, asyncio.base_events.Server)
    print(f"ready {server.sockets[0].getsockname()[1]}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(number, stop.set)
    await stop.wait()
    await runner.cleanup()


if __name__ == "__main__":
    asyncio.run(serve(json.loads(Path(sys.argv[1]).read_text())))
