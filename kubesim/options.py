"""kubesim's knobs: which control loops run and how fast. Delays are seconds of real time."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ImageConfig:
    """What kubesim's runtime knows of an image it runs as processes (ENTRYPOINT, CMD, ENV, WORKDIR, USER)."""

    entrypoint: tuple[str, ...]
    cmd: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    working_dir: str = "/"
    user: str = "0"


PODHERD_IMAGE = "ghcr.io/podherd/podherd"


def podherd_image() -> ImageConfig:
    """Podherd's own image (the Dockerfile's), run with this Python and the Podherd installed in it."""
    path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    env = {"PATH": path, "LANG": "C.UTF-8"}
    return ImageConfig((sys.executable, "-m", "podherd"), ("--help",), env, user="10001")


@dataclass
class SimOptions:
    # Scheduler: binds pending pods and schedules Reservations the way koord-scheduler does.
    scheduler: bool = True
    scheduler_names: list[str] = field(default_factory=lambda: ["default-scheduler", "koord-scheduler"])
    score: str = "least-allocated"  # or "most-allocated"
    # kube-scheduler's percentageOfNodesToScore; 0: its adaptive default (scheduler.feasible_nodes_to_find).
    percentage_of_nodes_to_score: int = 0
    schedule_delay: float = 0.0
    # Workload controllers: Deployment -> ReplicaSet -> pods, StatefulSet -> pods, DaemonSet -> pod per node.
    workloads: bool = True
    # Kubelet: bound pods become Running, then Ready; deleted pods terminate after their grace period.
    kubelet: bool = True
    start_delay: float = 0.05
    ready_delay: float = 0.05
    # A deleted pod's grace period is honoured up to this many seconds (tests need not wait 30 s).
    max_termination: float = 0.2
    # PodDisruptionBudget controller.
    pdb: bool = True
    # KubeVirt's eviction interceptor (a webhook process): pods annotated request-evict-only answer 429
    # "Eviction triggered evacuation" and are deleted after this delay.
    evict_in_background: bool = False
    evacuation_delay: float = 0.5
    # Seconds before a Job replaces a failed pod, doubled per failure (the Job controller's 10 s).
    job_backoff: float = 10.0
    # Kubernetes Events for scheduling and kubelet steps (off for very large benchmarks).
    record_events: bool = True
    # Watch: how often a bookmark is sent to watches that allow them; how many events are kept for resume.
    bookmark_interval: float = 5.0
    # A watch that names no timeoutSeconds ends after this many seconds times 1 to 2, at random, as with
    # kube-apiserver's --min-request-timeout (default 1800).
    min_request_timeout: float = 1800.0
    history: int = 200_000
    # Pods whose every container has one of these images (repository without tag: its config) run as real
    # processes (kubesim.kubelet.runtime); all others are simulated. `podherd_image()` is Podherd's own.
    images: dict[str, ImageConfig] = field(default_factory=dict)
    # Services outside kubesim that such pods reach by name: "namespace/name:port" -> ["host:port", ...].
    services: dict[str, list[str]] = field(default_factory=dict)
    # The client certificate and key (PEM) presented to every webhook, as kube-apiserver presents the one
    # its AdmissionConfiguration's kubeConfigFile names; None: none, as kube-apiserver without one.
    webhook_client: tuple[bytes, bytes] | None = None

    def service_backends(self) -> list[tuple[str, str, int]]:
        keys = []
        for key in self.services:
            ref, _, port = key.rpartition(":")
            namespace, _, name = ref.partition("/")
            keys.append((namespace, name, int(port)))
        return keys

    def backends(self, namespace: str, name: str, port: int) -> list[tuple[str, int]]:
        out = []
        for address in self.services[f"{namespace}/{name}:{port}"]:
            host, _, number = address.rpartition(":")
            out.append((host, int(number)))
        return out
