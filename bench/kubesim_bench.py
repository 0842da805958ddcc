"""kubesim at scale: load a large cluster, list every pod through the official client, fan watch events out.

    python -m bench.kubesim_bench [--nodes 5000] [--pods 100000] [--watchers 10] [--events 20000]

Prints one JSON document (and writes it to bench/results/kubesim.json):
- load: seconds to build the cluster in the store, resident memory after;
- list: seconds to list all pods with the official client (one request, and paginated by 500), and the same
  bytes fetched raw over HTTP, to separate the server's cost from the client's model building;
- watch: events per second delivered to N concurrent watchers (separate processes reading the stream),
  from the first write to the last event received by the last watcher, with per-event latency percentiles.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import resource
import ssl
import statistics
import time
import urllib.request
from typing import Any

import kubernetes

from bench.results_io import emit
from kubesim.options import SimOptions
from kubesim.scenarios import generate
from kubesim.sim import Simulator, start_in_thread


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _watcher(url: str, token: str, ca_pem: bytes, rv: str, expected: int, out: Any, ready: Any) -> None:
    """A watcher process: stream pod events from `rv`, record when each arrives, report when all are in."""
    request = urllib.request.Request(
        f"{url}/api/v1/pods?watch=true&resourceVersion={rv}&timeoutSeconds=600",
        headers={"Authorization": f"Bearer {token}"},
    )
    seen = 0
    stamps: list[tuple[str, float]] = []
    trusting = ssl.create_default_context(cadata=ca_pem.decode())
    with urllib.request.urlopen(request, timeout=600, context=trusting) as stream:
        ready.set()
        for line in stream:
            if not line.strip():
                continue
            seen += 1
            if seen % 100 == 0 or seen == expected:
                event = json.loads(line)
                stamps.append((event["object"]["metadata"]["labels"].get("bench-seq", ""), time.time()))
            if seen >= expected:
                break
    out.put({"seen": seen, "stamps": stamps, "done": time.time()})


def bench(nodes: int, pods: int, watchers: int, events: int) -> dict[str, Any]:
    result: dict[str, Any] = {"nodes": nodes, "pods": pods, "watchers": watchers, "events": events}
    before = rss_mb()
    started = time.perf_counter()
    handle = start_in_thread(
        SimOptions(
            scheduler=False,
            workloads=False,
            kubelet=False,
            pdb=False,
            record_events=False,
            history=max(200_000, events * 2),
        ),
        scenario=generate(nodes, pods),
    )
    result["load"] = {
        "seconds": round(time.perf_counter() - started, 2),
        "rss_mb_after_load": round(rss_mb(), 1),
        "rss_mb_before": round(before, 1),
    }
    try:
        api = kubernetes.config.new_client_from_config(config_file=str(handle.kubeconfig))
        core = kubernetes.client.CoreV1Api(api)

        started = time.perf_counter()
        everything = urllib.request.Request(f"{handle.url}/api/v1/pods", headers=handle.admin_headers)
        with urllib.request.urlopen(everything, timeout=600, context=handle.ssl_context) as response:
            raw = response.read()
        raw_seconds = time.perf_counter() - started
        started = time.perf_counter()
        listed = core.list_pod_for_all_namespaces(_request_timeout=600)
        one_request = time.perf_counter() - started
        count = len(listed.items)
        del listed
        started = time.perf_counter()
        token, paged = None, 0
        while True:
            page = core.list_pod_for_all_namespaces(limit=500, _continue=token, _request_timeout=600)
            paged += len(page.items)
            token = page.metadata._continue if page.metadata else None
            if not token:
                break
        paginated = time.perf_counter() - started
        result["list"] = {
            "pods_listed": count,
            "raw_http_seconds": round(raw_seconds, 2),
            "raw_bytes_mb": round(len(raw) / 1e6, 1),
            "client_one_request_seconds": round(one_request, 2),
            "client_paginated_500_seconds": round(paginated, 2),
            "client_pods_per_second": round(count / one_request),
            "paginated_pods": paged,
        }
        del raw

        namespaces_meta = core.list_namespace().metadata
        rv = namespaces_meta.resource_version if namespaces_meta else None
        ctx = multiprocessing.get_context("spawn")
        queue = ctx.Queue()
        readies = [ctx.Event() for _ in range(watchers)]
        procs = [
            ctx.Process(
                target=_watcher,
                args=(handle.url, handle.admin_token, handle.ca_pem, rv, events, queue, readies[i]),
            )
            for i in range(watchers)
        ]
        for proc in procs:
            proc.start()
        for ready in readies:
            ready.wait(60)
        names = handle.call(
            lambda sim: [
                (o["metadata"]["namespace"], o["metadata"]["name"])
                for o in list(sim.store.objects(sim.store.registry.core("pods")))[:events]
            ]
        )
        written: dict[str, float] = {}

        async def burst(sim: Simulator) -> None:
            pods_rt = sim.store.registry.core("pods")
            for seq, (namespace, name) in enumerate(names):
                if seq % 50 == 0:
                    await asyncio.sleep(0)  # let the server write to the watchers between writes

                def label(obj: dict[str, Any], seq: int = seq) -> dict[str, Any]:
                    obj["metadata"].setdefault("labels", {})["bench-seq"] = str(seq)
                    return obj

                sim.store.verbs.patch(pods_rt, namespace, name, apply=label)
                if seq % 100 == 99 or seq == len(names) - 1:
                    written[str(seq)] = time.time()

        first_write = time.time()
        assert handle.loop is not None and handle.sim is not None
        asyncio.run_coroutine_threadsafe(burst(handle.sim), handle.loop).result(600)
        writes_done = time.time()
        reports = [queue.get(timeout=600) for _ in procs]
        for proc in procs:
            proc.join(30)
        last = max(r["done"] for r in reports)
        latencies = sorted(
            (arrived - written[seq]) * 1000 for r in reports for seq, arrived in r["stamps"] if seq in written
        )
        delivered = sum(r["seen"] for r in reports)
        result["watch"] = {
            "events_written": len(names),
            "write_seconds": round(writes_done - first_write, 2),
            "events_delivered": delivered,
            "delivery_seconds": round(last - first_write, 2),
            "events_per_second_delivered": round(delivered / (last - first_write)),
            "latency_ms_p50": round(statistics.median(latencies), 1) if latencies else None,
            "latency_ms_p99": round(latencies[int(len(latencies) * 0.99) - 1], 1) if latencies else None,
        }
        result["rss_mb_peak"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    finally:
        handle.stop()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--watchers", type=int, default=10)
    parser.add_argument("--events", type=int, default=20_000)
    args = parser.parse_args()
    result = bench(args.nodes, args.pods, args.watchers, args.events)
    result["machine"] = {"cpus": os.cpu_count()}
    emit("kubesim", result)


if __name__ == "__main__":
    main()
