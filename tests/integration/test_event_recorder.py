"""The tracker's Kubernetes Events go beside its reconciles: queued, sent by a few senders, the queue drained
on shutdown; an Event the API server refuses is counted and the rest still go; a full queue drops the
newest."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import msgspec
import pytest
from kubernetes.client import ApiClient, Configuration
from prometheus_client import REGISTRY

from kubesim.sim import SimHandle
from services.tracker.jobs.recorder import EventRecorder
from shared.config.model import KubernetesConfig
from shared.kube.client import KubeClient

pytestmark = pytest.mark.integration


def count(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


def event(name: str, namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
        "involvedObject": {"kind": "PodMigrationJob", "name": "j"},
        "type": "Normal",
        "reason": "Running",
        "message": "the job is running",
    }


async def test_events_recorded_are_sent_and_drained_on_stop_refused_ones_counted(
    kubesim_factory: Callable[..., SimHandle],
) -> None:
    handle = kubesim_factory("small")
    kube = KubeClient.from_config(KubernetesConfig(kubeconfig=str(handle.kubeconfig)))
    failed = count("podherd_tracker_events_failed_total")
    try:
        recorder = EventRecorder(kube)
        stop = asyncio.Event()
        for i in range(20):
            recorder.record(event(f"e{i}"))
        recorder.record(event("lost", namespace="no-such-namespace"))
        stop.set()  # stopped at once: what was recorded before still goes
        await recorder.run(stop)
        listed = msgspec.json.decode(await kube.arequest("GET", "/api/v1/namespaces/default/events"))
        names = {e["metadata"]["name"] for e in listed["items"]}
        assert {f"e{i}" for i in range(20)} <= names
        assert count("podherd_tracker_events_failed_total") == failed + 1
    finally:
        await kube.aclose()


def test_a_full_queue_drops_the_newest_and_counts_it() -> None:
    dropped = count("podherd_tracker_events_dropped_total")
    recorder = EventRecorder(KubeClient(ApiClient(Configuration())), capacity=2)  # nothing runs it: no sends
    for i in range(3):
        recorder.record(event(f"e{i}"))
    assert [recorder.queue.get_nowait()["metadata"]["name"] for _ in range(2)] == ["e0", "e1"]
    assert count("podherd_tracker_events_dropped_total") == dropped + 1
