"""The watcher's throughput: pod events decoded and published to JetStream (acks on), msgspec vs the client.

    python -m bench.watcher_bench [--nodes 5000] [--pods 100000] [--changes 100000]

One kubesim (a separate process, `generate:NODES:PODS`, no control loops) and one nats-server serve two
variants, each run in a fresh process so its peak memory is its own:
- `msgspec`: the watcher as shipped (raw JSON -> msgspec -> PodInfo);
- `client-models`: the same loop, decoding every object into the official client's `V1Pod` first.

Each variant measures (1) the initial sync: list all pods, publish one event each, until every publish is
acknowledged and the checkpoint written; (2) steady throughput: with the watcher stopped, kubesim applies
`--changes` pod changes; the watcher restarts from its checkpoint and drains that backlog as fast as it can,
timed until every event is acknowledged. Results: JSON on stdout and in bench/results/watcher.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import kubernetes
import nats

from bench.results_io import emit
from kubesim.sim import kubeconfig_ca, kubeconfig_token, start_subprocess
from podherd.harness.servers import nats_server
from services.watcher.checkpoints import Checkpoints
from services.watcher.kinds import KINDS, Decoded, KindSpec
from services.watcher.loop import KindWatcher
from shared.api.objects import RawMeta, RawPod, WorkloadResolver, pod_info
from shared.config.loader import config_from_dict
from shared.kube.client import KubeClient
from shared.nats import bus


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def model_decode(raw: bytes, resolver: WorkloadResolver) -> Decoded:
    """The baseline: build the client's V1Pod model, then read the payload's fields from it."""
    pod = kubernetes.client.V1Pod.from_dict(json.loads(bytes(raw)))
    assert pod is not None and pod.metadata is not None and pod.spec is not None
    meta = pod.metadata
    assert meta.name is not None and meta.uid is not None and meta.resource_version is not None
    raw_pod = RawPod(
        metadata=RawMeta(
            name=meta.name,
            namespace=meta.namespace,
            uid=meta.uid,
            resourceVersion=meta.resource_version,
            labels=meta.labels,
            annotations=meta.annotations,
            creationTimestamp=meta.creation_timestamp,
            deletionTimestamp=meta.deletion_timestamp,
        )
    )
    raw_pod.spec.nodeName = pod.spec.node_name
    raw_pod.spec.schedulerName = pod.spec.scheduler_name
    raw_pod.spec.priority = pod.spec.priority
    raw_pod.spec.containers = [
        {"resources": {"requests": (c.resources.requests if c.resources else None) or {}}}
        for c in pod.spec.containers
    ]
    raw_pod.status.phase = pod.status.phase if pod.status else None
    return Decoded(raw_pod.metadata, pod_info(raw_pod, resolver))


async def run_variant(
    variant: str, nats_url: str, kubeconfig: str, sim_url: str, changes: int
) -> dict[str, Any]:
    prefix = f"bench{variant.replace('-', '')}{int(time.time())}"
    config = config_from_dict(
        {
            "nats": {"url": nats_url, "subjectPrefix": prefix, "duplicateWindow": "2m"},
            "kubernetes": {"kubeconfig": kubeconfig},
            "watcher": {"checkpointInterval": "1s", "pageSize": 500},
        }
    )
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    subjects = bus.Subjects(prefix)
    await bus.ensure_events_stream(js, subjects, config.nats)
    checkpoints = Checkpoints(await bus.ensure_kv(js, subjects.watch_bucket, config.nats))
    kube = KubeClient.from_config(config.kubernetes)
    spec = KINDS["pods"]
    if variant == "client-models":
        spec = KindSpec(
            spec.kind, spec.plural, spec.group, spec.version, spec.namespaced, model_decode, spec.minimal
        )
    result: dict[str, Any] = {"variant": variant}

    # (1) initial sync
    watcher = KindWatcher(
        spec, kube, js, subjects=subjects, checkpoints=checkpoints, config=config.watcher, term=lambda: 1
    )
    started = time.perf_counter()
    await watcher.relist()
    result["initial_sync_seconds"] = round(time.perf_counter() - started, 2)
    result["initial_sync_pods"] = len(watcher.out.known)
    result["initial_sync_events_per_second"] = round(len(watcher.out.known) / (time.perf_counter() - started))

    # (2) drain a backlog of changes made while the watcher was away
    def touch() -> str:
        request = urllib.request.Request(
            f"{sim_url}/kubesim/touch?resource=pods&count={changes}",
            method="POST",
            headers={"Authorization": f"Bearer {kubeconfig_token(Path(kubeconfig))}"},
        )
        trusting = ssl.create_default_context(cadata=kubeconfig_ca(Path(kubeconfig)).decode())
        with urllib.request.urlopen(request, timeout=600, context=trusting) as response:
            return str(json.loads(response.read())["resourceVersion"])

    target = await asyncio.to_thread(touch)
    watcher = KindWatcher(
        spec, kube, js, subjects=subjects, checkpoints=checkpoints, config=config.watcher, term=lambda: 1
    )
    watcher.out.rv = watcher.out.saved_rv = await checkpoints.load("pods")
    stop = asyncio.Event()
    cpu_before = _cpu()
    started = time.perf_counter()
    task = asyncio.create_task(watcher.watch())
    while int(watcher.out.rv or 0) < int(target):  # noqa: ASYNC110 - the harness samples, the watcher runs free
        await asyncio.sleep(0.01)
    await watcher.out.flush()
    elapsed = time.perf_counter() - started
    cpu = _cpu() - cpu_before
    stop.set()
    task.cancel()
    result["changes"] = changes
    result["events_per_second"] = round(changes / elapsed)
    result["drain_seconds"] = round(elapsed, 2)
    # The watcher shares 2 cores with kubesim and nats-server here; per CPU-second is its own capacity.
    result["events_per_watcher_cpu_second"] = round(changes / cpu)
    result["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    info = await js.stream_info(subjects.events_stream)
    result["stream_messages"] = info.state.messages
    await js.delete_stream(subjects.events_stream)
    await nc.close()
    await kube.aclose()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--changes", type=int, default=100_000)
    parser.add_argument("--variant", help=argparse.SUPPRESS)
    parser.add_argument("--nats", help=argparse.SUPPRESS)
    parser.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    parser.add_argument("--sim-url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.variant:  # a child: one variant, JSON on stdout
        print(
            json.dumps(
                asyncio.run(run_variant(args.variant, args.nats, args.kubeconfig, args.sim_url, args.changes))
            )
        )
        return
    server = nats_server()
    started = time.perf_counter()
    sim = start_subprocess(
        f"generate:{args.nodes}:{args.pods}", extra_args=["--no-controllers", "--no-events"], timeout=600
    )
    load_seconds = round(time.perf_counter() - started, 2)
    try:
        variants = []
        for variant in ("msgspec", "client-models"):
            out = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "bench.watcher_bench",
                    "--variant",
                    variant,
                    "--nats",
                    server.url,
                    "--kubeconfig",
                    str(sim.kubeconfig),
                    "--sim-url",
                    sim.url,
                    "--changes",
                    str(args.changes),
                ],
                capture_output=True,
                text=True,
                check=False,
                timeout=3600,
            )
            if out.returncode != 0:
                raise SystemExit(f"variant {variant} failed:\n{out.stderr[-3000:]}")
            variants.append(json.loads(out.stdout.strip().splitlines()[-1]))
    finally:
        sim.stop()
        server.stop()
    report = {
        "nodes": args.nodes,
        "pods": args.pods,
        "kubesim_load_seconds": load_seconds,
        "variants": variants,
        "speedup_events_per_second": round(
            variants[0]["events_per_second"] / variants[1]["events_per_second"], 1
        ),
        "speedup_initial_sync": round(
            variants[1]["initial_sync_seconds"] / variants[0]["initial_sync_seconds"], 1
        ),
    }
    emit("watcher", report)


if __name__ == "__main__":
    main()
