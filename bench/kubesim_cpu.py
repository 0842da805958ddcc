"""kubesim's CPU per API request, side by side for two source trees (e.g. before and after a change).

    python -m bench.kubesim_cpu [--before PATH] [--requests 3000]

Each tree's `podherd sim` runs as its own process (controllers and events off, so only requests cost CPU)
with that tree's CRDs applied; the official client, through the kubeconfig that kubesim wrote (whatever
its transport and credentials), sends the same mix: get a pod, list a namespace's pods by 50, patch a pod's
label, create a pod and delete it (a built-in object's decoding, defaulting and admission), and create, read,
patch and delete a PodMigrationJob (the custom-resource path, schema included).
The server's CPU is read from /proc before and after. Prints one JSON document
(bench/results/kubesim_cpu.json).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import kubernetes
import yaml

from bench.results_io import emit

ROOT = Path(__file__).resolve().parents[1]
GROUP, VERSION = "scheduling.koordinator.sh", "v1alpha1"
OPERATIONS_PER_ROUND = 9


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _start(tree: Path, work: Path) -> tuple[subprocess.Popen[bytes], Path]:
    kubeconfig = work / "kubeconfig"
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "podherd", "sim", "--scenario", "generate:50:2000", "--port", "0"),
            *("--kubeconfig", str(kubeconfig), "--no-controllers", "--no-events"),
        ],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while not (kubeconfig.exists() and kubeconfig.stat().st_size):
        if process.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"kubesim from {tree} did not start")
        time.sleep(0.05)
    return process, kubeconfig


def _round(core: Any, custom: Any, namespace: str, pod: str, seq: int) -> None:
    core.read_namespaced_pod(pod, namespace)
    core.list_namespaced_pod(namespace, limit=50)
    core.patch_namespaced_pod(pod, namespace, {"metadata": {"labels": {"bench-seq": str(seq)}}})
    made = {  # a pod as a controller makes one: decoded, defaulted and admitted
        "metadata": {"name": f"bench-{seq}", "labels": {"app": "bench"}},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "app:1",
                    "resources": {"requests": {"cpu": "10m"}},
                    "ports": [{"containerPort": 80}],
                }
            ]
        },
    }
    core.create_namespaced_pod(namespace, made)
    core.delete_namespaced_pod(f"bench-{seq}", namespace, grace_period_seconds=0)
    job = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PodMigrationJob",
        "metadata": {"name": f"bench-{seq}"},
        "spec": {"podRef": {"namespace": namespace, "name": pod}, "ttl": "5m"},
    }
    custom.create_cluster_custom_object(GROUP, VERSION, "podmigrationjobs", job)
    custom.get_cluster_custom_object(GROUP, VERSION, "podmigrationjobs", f"bench-{seq}")
    custom.patch_cluster_custom_object(
        GROUP, VERSION, "podmigrationjobs", f"bench-{seq}", {"spec": {"paused": True}}
    )
    custom.delete_cluster_custom_object(GROUP, VERSION, "podmigrationjobs", f"bench-{seq}")


def _until_served(custom: Any) -> None:
    """The CRD's resource answers (established)."""
    for _ in range(200):
        try:
            custom.list_cluster_custom_object(GROUP, VERSION, "podmigrationjobs")
            return
        except kubernetes.client.ApiException:
            time.sleep(0.05)
    raise SystemExit("podmigrationjobs never served")


def measure(tree: Path, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="kubesim-cpu-") as directory:
        process, kubeconfig = _start(tree, Path(directory))
        try:
            api = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))
            core, custom = kubernetes.client.CoreV1Api(api), kubernetes.client.CustomObjectsApi(api)
            extensions = kubernetes.client.ApiextensionsV1Api(api)
            for path in sorted((tree / "deploy" / "crds").glob("*.scheduling.*.yaml")):
                extensions.create_custom_resource_definition(yaml.safe_load(path.read_text()))
            _until_served(custom)
            pod = core.list_pod_for_all_namespaces(limit=1).items[0]
            assert pod.metadata is not None and pod.metadata.namespace and pod.metadata.name
            namespace, name = pod.metadata.namespace, pod.metadata.name
            for seq in range(50):  # warm-up: connections, caches
                _round(core, custom, namespace, name, seq)
            cpu_before, started = _cpu_seconds(process.pid), time.perf_counter()
            for seq in range(50, 50 + rounds):
                _round(core, custom, namespace, name, seq)
            cpu = _cpu_seconds(process.pid) - cpu_before
            wall = time.perf_counter() - started
            api.close()
        finally:
            process.terminate()
            process.wait(30)
    requests = rounds * OPERATIONS_PER_ROUND
    return {
        "tree": str(tree),
        "requests": requests,
        "server_cpu_seconds": round(cpu, 2),
        "server_cpu_ms_per_request": round(cpu * 1000 / requests, 3),
        "requests_per_second": round(requests / wall),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--before", type=Path, help="another source tree (e.g. a git worktree) to compare")
    parser.add_argument("--requests", type=int, default=3000, help="about this many requests per tree")
    args = parser.parse_args()
    rounds = max(1, args.requests // OPERATIONS_PER_ROUND)
    result: dict[str, Any] = {"after": measure(ROOT, rounds)}
    if args.before:
        result["before"] = measure(args.before.resolve(), rounds)
        before, after = result["before"], result["after"]
        result["cpu_per_request_change_percent"] = round(
            (after["server_cpu_ms_per_request"] / before["server_cpu_ms_per_request"] - 1) * 100, 1
        )
    emit("kubesim_cpu", result)


if __name__ == "__main__":
    main()
