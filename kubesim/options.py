"""kubesim's knobs: which control loops run and how fast. Delays are seconds of real time."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SimOptions:
    # Scheduler: binds pending pods and schedules Reservations the way koord-scheduler does.
    scheduler: bool = True
    scheduler_names: list[str] = field(default_factory=lambda: ["default-scheduler", "koord-scheduler"])
    score: str = "least-allocated"  # or "most-allocated"
    schedule_delay: float = 0.0
    # Workload controllers: Deployment -> ReplicaSet -> pods, StatefulSet -> pods.
    workloads: bool = True
    # Kubelet: bound pods become Running, then Ready; deleted pods terminate after their grace period.
    kubelet: bool = True
    start_delay: float = 0.05
    ready_delay: float = 0.05
    # A deleted pod's grace period is honoured up to this many seconds (tests need not wait 30 s).
    max_termination: float = 0.2
    # PodDisruptionBudget controller.
    pdb: bool = True
    # Pods annotated request-evict-only answer 429 "Eviction triggered evacuation" (a simulated webhook) and
    # are deleted after this delay.
    evict_in_background: bool = False
    evacuation_delay: float = 0.5
    # Kubernetes Events for scheduling and kubelet steps (off for very large benchmarks).
    record_events: bool = True
    # Watch: how often a bookmark is sent to watches that allow them; how many events are kept for resume.
    bookmark_interval: float = 5.0
    history: int = 200_000
