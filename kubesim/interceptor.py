"""KubeVirt's eviction interceptor in a cluster kubesim runs with `--evict-in-background`: its webhook process
(`kubesim.evacuation_webhook`) started, served behind the `kubevirt/virt-api` Service with a certificate of
the cluster's CA for that Service's name, and registered as KubeVirt registers it: a
ValidatingWebhookConfiguration on `pods/eviction` CREATE, failing closed, without side effects on dry runs."""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from kubesim.apiserver.serving import ServingCert
from kubesim.apiserver.store import Store
from kubesim.evacuation_webhook import NAME, PATH
from kubesim.options import SimOptions
from shared.access.private_files import write_private

NAMESPACE, SERVICE, PORT = "kubevirt", "virt-api", 443
USER = "system:serviceaccount:kubevirt:kubevirt-apiserver"
_START_TIMEOUT = 10.0


class Interceptor:
    def __init__(self, store: Store, options: SimOptions, tls: ServingCert) -> None:
        self.store, self.options, self.tls = store, options, tls
        self.process: asyncio.subprocess.Process | None = None
        self.directory = Path(tempfile.mkdtemp(prefix="kubesim-interceptor-"))

    async def start(self, api_url: str) -> None:
        assert self.tls.authority is not None
        files = {
            "serving": self.tls.authority.leaf(SERVICE, names=(f"{SERVICE}.{NAMESPACE}.svc",)),
            "client": self.tls.client_cert(USER, ("system:masters",)),
        }
        spec: dict[str, str] = {"server": api_url, "ca": self._write("ca.crt", self.tls.ca_pem)}
        for role, (cert, key) in files.items():
            spec[f"{role}_cert"], spec[f"{role}_key"] = (
                self._write(f"{role}.crt", cert),
                self._write(f"{role}.key", key),
            )
        path = self._write("spec.json", json.dumps(spec).encode())
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "kubesim.evacuation_webhook", path,
            stdout=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        assert self.process.stdout is not None
        async with asyncio.timeout(_START_TIMEOUT):
            line = (await self.process.stdout.readline()).decode()
        if not line.startswith("ready "):
            raise OSError(f"KubeVirt's eviction interceptor did not start: {line.strip() or 'it ended'}")
        self.options.services[f"{NAMESPACE}/{SERVICE}:{PORT}"] = [f"127.0.0.1:{int(line.split()[1])}"]
        rt = self.store.registry.get("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations")
        assert rt is not None
        self.store.verbs.create(rt, "", self._configuration())

    def _write(self, name: str, data: bytes) -> str:
        path = write_private(self.directory / name, data)
        return str(path)

    def _configuration(self) -> dict[str, Any]:
        rule = {
            "operations": ["CREATE"],
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "resources": ["pods/eviction"],
            "scope": "Namespaced",
        }
        service = {"namespace": NAMESPACE, "name": SERVICE, "path": PATH, "port": PORT}
        webhook = {
            "name": NAME,
            "clientConfig": {"service": service, "caBundle": base64.b64encode(self.tls.ca_pem).decode()},
            "rules": [rule],
            "failurePolicy": "Fail",
            "sideEffects": "NoneOnDryRun",
            "admissionReviewVersions": ["v1"],
        }
        return {"metadata": {"name": "virt-api-validator"}, "webhooks": [webhook]}

    async def stop(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.terminate()
            try:
                async with asyncio.timeout(5):
                    await self.process.wait()
            except TimeoutError:
                self.process.kill()
                await self.process.wait()
        shutil.rmtree(self.directory, ignore_errors=True)
