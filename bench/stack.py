"""The pipeline as deployed, for benchmarks and the chaos run: kubesim in this process, the four services as
`podherd run` processes against given NATS and Redis, Podherd's CRDs installed."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import yaml

from bench.topology import Servers
from kubesim.options import SimOptions
from kubesim.sim import SimHandle, start_in_thread
from podherd.harness.processes import SERVICES, ServiceProcesses
from podherd.install import install, requester_file, service_kubeconfig
from podherd.realcluster import engine as real_engine
from shared.config.loader import config_from_dict
from shared.config.model import KubernetesConfig, PodherdConfig
from shared.kube.client import KubeClient

Parts = tuple[SimHandle, KubeClient, ServiceProcesses, PodherdConfig]


def nodes(count: int, cpu: int, memory: str) -> list[dict[str, Any]]:
    return [
        {"name": "node-{i}", "count": count, "capacity": {"cpu": str(cpu), "memory": memory, "pods": "110"}}
    ]


def deployment(name: str, replicas: int, cpu: str, memory: str, namespace: str = "default") -> dict[str, Any]:
    """A Deployment of `replicas` pods scheduled by koord-scheduler (so ReservationFirst applies)."""
    return {
        "kind": "Deployment",
        "name": name,
        "namespace": namespace,
        "replicas": replicas,
        "requests": {"cpu": cpu, "memory": memory},
        "schedulerName": "koord-scheduler",
        # A pod gone a second after its eviction: the real engine's kwok waits out the grace period as a
        # kubelet whose container ignores SIGTERM would (kubesim ends a pod within 0.2 s whatever it is).
        "terminationGracePeriodSeconds": 1,
    }


def config_document(
    handle: SimHandle, servers: Servers, prefix: str, ttl: str, **migration: Any
) -> dict[str, Any]:
    return {
        "nats": {**servers.nats_section(), "subjectPrefix": prefix},
        "redis": {**servers.redis_section(), "keyPrefix": prefix},
        "kubernetes": {"kubeconfig": str(handle.kubeconfig)},
        "watcher": {"checkpointInterval": "200ms"},
        "logging": {"level": "INFO"},
        "migrationController": {
            "evictQPS": 1000,
            "evictBurst": 1000,
            "defaultJobTTL": ttl,
            "objectLimiters": {"workload": {"duration": "1s", "maxMigrating": 1000, "burst": 1000}},
            **migration,
        },
    }


@contextlib.asynccontextmanager
async def stack(
    scenario: dict[str, Any],
    servers: Servers,
    prefix: str,
    replicas: int,
    ttl: str,
    work: Path,
    engine: str = "kubesim",
    **migration: Any,
) -> AsyncIterator[Parts]:
    if engine == "real":  # the control plane `make controlplane` builds, as local processes
        handle = real_engine.start(scenario)
    else:
        handle = start_in_thread(SimOptions(), scenario=scenario)
    kube = KubeClient.from_config(KubernetesConfig(kubeconfig=str(handle.kubeconfig)))
    install(kube, rbac=True)  # each service runs as its own ServiceAccount, as deployed
    document = config_document(handle, servers, prefix, ttl, **migration)
    # Intents are authorized as deploy/ configures it: the harness sends them as ServiceAccount podherd/bench.
    token = requester_file(kube, work / f"requester-{prefix}.token", audience="podherd", name="bench")
    document["intents"] = {"tokenFile": str(token)}
    config = config_from_dict(document)
    path = work / f"{prefix}.yaml"
    path.write_text(yaml.safe_dump(document))
    kubeconfigs = {
        s: service_kubeconfig(kube, handle.kubeconfig, s, path=work / f"kubeconfig-{prefix}-{s}")
        for s in SERVICES
    }
    processes = ServiceProcesses(
        path, work / f"logs-{prefix}", kubeconfigs, pki=servers.pki, redis_users=servers.redis_users
    )
    try:
        processes.start_all(replicas)
        processes.wait_ready(90)
        yield handle, kube, processes, config
    finally:
        processes.stop_all(30)
        await kube.aclose()
        handle.stop()
