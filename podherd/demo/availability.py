"""How available each workload stays while something happens to the cluster, measured from pod events.

A thread follows the namespace's pods (list, then watch from the list's resourceVersion) and keeps, per app
label, how many pods are Ready; from the first state on it integrates the time each app spends below the
Ready count it started with, and at zero, and counts pods Pending (created, not yet running on a node).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import kubernetes
import urllib3


def _ready(pod: Any) -> bool:
    if pod.metadata.deletion_timestamp is not None or pod.status.phase != "Running":
        return False
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


@dataclass
class AppAvailability:
    desired: int
    lowest: int
    seconds_degraded: float = 0.0  # below `desired` Ready pods
    seconds_down: float = 0.0  # no Ready pod at all

    def as_dict(self) -> dict[str, Any]:
        return {
            "desired": self.desired,
            "lowest_ready": self.lowest,
            "replicas_unavailable": self.desired - self.lowest,
            "seconds_degraded": round(self.seconds_degraded, 1),
            "seconds_down": round(self.seconds_down, 1),
        }


@dataclass
class Availability:
    """Start it, do the work, `stop()` it: per app, the fewest Ready pods, seconds below and at zero."""

    core: Any  # kubernetes.client.CoreV1Api
    apps: list[str]
    namespace: str = "default"
    apps_seen: dict[str, AppAvailability] = field(default_factory=dict)
    most_pending: int = 0
    _pods: dict[str, Any] = field(default_factory=dict)
    _since: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> Availability:
        listing = self.core.list_namespaced_pod(self.namespace)
        self._pods = {p.metadata.name: p for p in listing.items}
        counts = self._counts()
        self.apps_seen = {app: AppAvailability(desired=counts[app], lowest=counts[app]) for app in self.apps}
        self._since = time.monotonic()
        self._thread = threading.Thread(
            target=self._run, args=(listing.metadata.resource_version,), daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        with self._lock:
            self._account(time.monotonic())
            return {
                "apps": {app: seen.as_dict() for app, seen in self.apps_seen.items()},
                "most_pods_unscheduled": self.most_pending,
                "pods_left_pending": self._pending(),
            }

    def recovered(self) -> bool:
        """Every app back at the Ready count it started with, and no pod Pending."""
        with self._lock:
            counts = self._counts()
            return self._pending() == 0 and all(counts[a] >= s.desired for a, s in self.apps_seen.items())

    def _counts(self) -> Counter[str]:
        return Counter((p.metadata.labels or {}).get("app", "") for p in self._pods.values() if _ready(p))

    def _pending(self) -> int:
        """Pods waiting for room: Pending, not placed on a node."""
        return sum(1 for p in self._pods.values() if p.status.phase == "Pending" and not p.spec.node_name)

    def _account(self, now: float) -> None:
        """The time since the last event, spent in the state before it."""
        spent, self._since = now - self._since, now
        counts = self._counts()
        for app, seen in self.apps_seen.items():
            if counts[app] < seen.desired:
                seen.seconds_degraded += spent
            if counts[app] == 0:
                seen.seconds_down += spent

    def _run(self, resource_version: str) -> None:
        while not self._stop.is_set():
            watch = kubernetes.watch.Watch()
            try:
                for event in watch.stream(
                    self.core.list_namespaced_pod,
                    self.namespace,
                    resource_version=resource_version,
                    timeout_seconds=1,
                ):
                    pod = event["object"]
                    resource_version = pod.metadata.resource_version or resource_version
                    with self._lock:
                        self._account(time.monotonic())
                        if event["type"] == "DELETED":
                            self._pods.pop(pod.metadata.name, None)
                        else:
                            self._pods[pod.metadata.name] = pod
                        counts = self._counts()
                        for app, seen in self.apps_seen.items():
                            seen.lowest = min(seen.lowest, counts[app])
                        self.most_pending = max(self.most_pending, self._pending())
                    if self._stop.is_set():
                        watch.stop()
            except (urllib3.exceptions.HTTPError, kubernetes.client.ApiException):
                if self._stop.is_set():
                    return
