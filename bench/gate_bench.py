"""The admission gate's latency, beside a webhook that does nothing, in one run.

    python -m bench.gate_bench [--rate 200] [--seconds 10] [--pods 400]

Both webhooks run as processes of their own on this machine, with the same HTTP stack and TLS: the gate
(`podherd run gate`, as its own ServiceAccount against kubesim, in this process) and a no-op webhook that
allows every review. A load of AdmissionReviews arrives at `--rate` a second for each, open loop (a review
is sent on schedule whether or not the last was answered), the two interleaved, over kept-alive HTTPS
connections as the API server holds them; each review's time is from its send to its answer.

What the gate is asked:
- `not opted in`: evictions of pods that carry no opt-in label, in a namespace not opted in: the reviews
  nearly every eviction in a cluster makes, answered from the gate's watch of labelled pods.
- `in progress` (reported, no target): evictions of opted-in pods whose job is already running, in an
  opted-in namespace: the pod and its job are read from the API server for each.
Target: the gate's p99 for `not opted in` at most twice the no-op's, and at most 20 ms.
Results: JSON on stdout and in bench/results/gate.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp

from bench.results_io import emit
from kubesim.options import SimOptions
from kubesim.sim import start_in_thread
from podherd.harness.gate import start_gate
from podherd.harness.processes import webhook_port
from podherd.install import install
from services.gate.evacuation import job_name, pod_key
from shared.access.authority import Authority
from shared.api.names import LABEL_EVACUATE, LABEL_EVACUATED_POD
from shared.config.model import KubernetesConfig
from shared.kube.client import KubeClient

NOOP = """
import asyncio, ssl, sys
from aiohttp import web

async def allow(request):
    review = await request.json()
    return web.json_response({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                              "response": {"uid": review["request"]["uid"], "allowed": True}})

async def main():
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(sys.argv[1], sys.argv[2])
    app = web.Application()
    app.router.add_post("/{path:.*}", allow)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    print(f"webhook endpoint on 127.0.0.1:{site._server.sockets[0].getsockname()[1]}", flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


def review(namespace: str, name: str) -> bytes:
    request = {
        "uid": str(uuid.uuid4()),
        "kind": {"group": "policy", "version": "v1", "kind": "Eviction"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "subResource": "eviction",
        "name": name,
        "namespace": namespace,
        "operation": "CREATE",
        "userInfo": {
            "username": "system:serviceaccount:kube-system:descheduler",
            "groups": ["system:authenticated"],
        },
        "object": {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}},
        "dryRun": False,
    }
    return json.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    ).encode()


def cluster(admin: KubeClient, pods: int) -> None:
    """`plain` (not opted in) and `opted` (opted in as a namespace), each with `pods` pods; a job in
    progress for every pod of `opted`, as the gate would have made it."""
    for namespace, labels in (("plain", {}), ("opted", {LABEL_EVACUATE: "true"})):
        admin.request("POST", "/api/v1/namespaces", body={"metadata": {"name": namespace, "labels": labels}})
        for i in range(pods):
            body = {"metadata": {"name": f"p{i}"}, "spec": {"containers": [{"name": "c", "image": "c"}]}}
            made = json.loads(admin.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=body))
            if namespace == "opted":  # as the gate makes it: its name, its mark, the pod's uid
                uid = made["metadata"]["uid"]
                job = {
                    "apiVersion": "scheduling.koordinator.sh/v1alpha1",
                    "kind": "PodMigrationJob",
                    "metadata": {
                        "name": job_name(uid),
                        "labels": {LABEL_EVACUATED_POD: pod_key(namespace, f"p{i}")},
                    },
                    "spec": {"podRef": {"kind": "Pod", "namespace": namespace, "name": f"p{i}", "uid": uid}},
                }
                admin.request("POST", "/apis/scheduling.koordinator.sh/v1alpha1/podmigrationjobs", body=job)


async def load(
    targets: dict[str, tuple[str, str]], pods: int, *, rate: float, seconds: float, ca: dict[str, Path]
) -> dict[str, list[float]]:
    """Each target's review times (ms): `rate` a second for each, interleaved. target -> (url, namespace)."""
    times: dict[str, list[float]] = {name: [] for name in targets}
    failures: dict[str, int] = dict.fromkeys(targets, 0)
    sessions = {}
    for name in targets:
        context = ssl.create_default_context(cafile=str(ca[name]))
        sessions[name] = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context, limit=64))

    async def one(name: str, index: int) -> None:
        url, namespace = targets[name]
        body = review(namespace, f"p{index % pods}")
        started = time.perf_counter()
        try:
            async with sessions[name].post(
                url, data=body, headers={"Content-Type": "application/json"}
            ) as answer:
                await answer.read()
                ok = answer.status == 200
        except aiohttp.ClientError:
            ok = False
        if ok:
            times[name].append((time.perf_counter() - started) * 1000)
        else:
            failures[name] += 1

    tasks = []
    interval = 1.0 / (rate * len(targets))
    start = time.perf_counter()
    total = int(rate * seconds)
    for i in range(total):
        for j, name in enumerate(targets):
            due = start + (i * len(targets) + j) * interval
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            tasks.append(asyncio.create_task(one(name, i)))
    await asyncio.gather(*tasks)
    for session in sessions.values():
        await session.close()
    if any(failures.values()):
        raise SystemExit(f"reviews not answered: {failures}")
    return times


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "reviews": len(ordered),
        "p50_ms": round(statistics.median(ordered), 2),
        "p99_ms": round(ordered[int(len(ordered) * 0.99) - 1], 2),
        "max_ms": round(ordered[-1], 2),
    }


def run(rate: float, seconds: float, pods: int) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="gate-bench-"))
    handle = start_in_thread(SimOptions(), scenario=None)
    admin = KubeClient.from_config(KubernetesConfig(kubeconfig=str(handle.kubeconfig)))
    try:
        install(admin)  # the CRDs, then the jobs before the gate: only it may name a job `evacuation-…`
        cluster(admin, pods)
        gate = start_gate(handle, workdir)
        authority = Authority.new("noop-ca")
        cert, key = authority.leaf("noop", ips=("127.0.0.1",))
        (workdir / "noop.crt").write_bytes(cert)
        (workdir / "noop.key").write_bytes(key)
        (workdir / "noop-ca.crt").write_bytes(authority.pem)
        (workdir / "gate-ca.crt").write_bytes(gate.ca)
        log = workdir / "noop.log"
        noop = subprocess.Popen(
            [sys.executable, "-c", NOOP, str(workdir / "noop.crt"), str(workdir / "noop.key")],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert noop.stdout is not None
        log.write_text(noop.stdout.readline())  # its first line once it listens ("" if it ended first)
        if not webhook_port(log):
            raise SystemExit(f"the no-op webhook did not start (exit {noop.wait(10)})")
        gate_port, noop_port = webhook_port(gate.replicas[0].log), webhook_port(log)
        cas = {
            "gate": workdir / "gate-ca.crt",
            "noop": workdir / "noop-ca.crt",
            "gate, in progress": workdir / "gate-ca.crt",
        }
        plain = {
            "gate": (f"https://127.0.0.1:{gate_port}/evictions", "plain"),
            "noop": (f"https://127.0.0.1:{noop_port}/evictions", "plain"),
        }
        asyncio.run(load(plain, pods, rate=rate, seconds=1.0, ca=cas))  # connections made, code warm
        times = asyncio.run(load(plain, pods, rate=rate, seconds=seconds, ca=cas))
        busy = {"gate, in progress": (f"https://127.0.0.1:{gate_port}/evictions/namespace", "opted")}
        busy_times = asyncio.run(load(busy, pods, rate=rate, seconds=seconds / 2, ca=cas))
        noop.terminate()
        noop.wait(10)
        gate.processes.stop_all()
    finally:
        admin.close()
        handle.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    result = {name: summary(values) for name, values in {**times, **busy_times}.items()}
    ratio = result["gate"]["p99_ms"] / result["noop"]["p99_ms"]
    return {
        "rate_per_second": rate,
        "seconds": seconds,
        "not_opted_in": {"gate": result["gate"], "noop": result["noop"], "p99_ratio": round(ratio, 2)},
        "in_progress": result["gate, in progress"],
        "target": "gate p99 <= 2x the no-op's and <= 20 ms (not opted in)",
        "met": ratio <= 2.0 and result["gate"]["p99_ms"] <= 20.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--pods", type=int, default=400)
    args = parser.parse_args()
    emit("gate", run(args.rate, args.seconds, args.pods))


if __name__ == "__main__":
    main()
