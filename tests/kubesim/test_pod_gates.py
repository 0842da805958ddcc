"""A pod's scheduling gates (it stays SchedulingGated until every gate is removed; gates are only ever
removed) and readiness gates (not Ready until each gate's condition, written by its owner, is True), as
the API server, kube-scheduler and the kubelet handle them: a test can hold a pod with legal calls only."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import kubernetes
import pytest

from tests.kube import Kube, refusal, watch_until

pytestmark = [pytest.mark.integration]
GATE = "example.com/room"


@pytest.fixture
def kube(fragmented: Kube) -> Kube:
    return fragmented


def pod(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "i"}], **spec}}


def condition(p: Any, kind: str) -> Any:
    return next((c for c in p.status.conditions or [] if c.type == kind), None)


def refused(call: Callable[[], object]) -> dict[str, Any]:
    with pytest.raises(kubernetes.client.ApiException) as caught:
        call()
    return refusal(caught.value)


def test_a_gated_pod_waits_unscheduled_until_its_gates_are_removed(kube: Kube) -> None:
    kube.core.create_namespaced_pod("default", pod("held", schedulingGates=[{"name": GATE}]))
    held = kube.core.read_namespaced_pod("held", "default")
    scheduled = condition(held, "PodScheduled")
    assert (scheduled.status, scheduled.reason, scheduled.message) == (
        "False",
        "SchedulingGated",
        "Scheduling is blocked due to non-empty scheduling gates",
    )
    status = refused(
        lambda: kube.core.patch_namespaced_pod(
            "held", "default", {"spec": {"schedulingGates": [{"name": GATE}, {"name": "more"}]}}
        )
    )
    assert status["message"] == (
        'Pod "held" is invalid: spec.schedulingGates[1].name: Forbidden: only deletion is allowed, but found '
        "new scheduling gate 'more'"
    )
    placed = pod("placed", schedulingGates=[{"name": GATE}], nodeName="node-1")
    status = refused(lambda: kube.core.create_namespaced_pod("default", placed))
    assert status["message"] == (
        'Pod "placed" is invalid: spec.nodeName: Forbidden: cannot be set until all schedulingGates have '
        "been cleared"
    )
    assert kube.core.read_namespaced_pod("held", "default").spec.node_name is None
    kube.core.patch_namespaced_pod("held", "default", {"spec": {"schedulingGates": None}})
    watch_until(
        kube.core.list_namespaced_pod,
        lambda pods: bool(pods["default/held"].spec.node_name),
        namespace="default",
        field_selector="metadata.name=held",
    )


def test_a_pod_is_ready_only_once_its_readiness_gates_conditions_are_true(kube: Kube) -> None:
    kube.core.create_namespaced_pod("default", pod("gated", readinessGates=[{"conditionType": GATE}]))

    def watched(holds: Callable[[Any], bool]) -> Any:
        found = watch_until(
            kube.core.list_namespaced_pod,
            lambda pods: holds(pods["default/gated"]),
            namespace="default",
            field_selector="metadata.name=gated",
        )
        return found["default/gated"]

    waiting = watched(lambda p: getattr(condition(p, "ContainersReady"), "status", None) == "True")
    ready = condition(waiting, "Ready")
    assert (ready.status, ready.reason, ready.message) == (
        "False",
        "ReadinessGatesNotReady",
        f'corresponding condition of pod readiness gate "{GATE}" does not exist.',
    )
    own = {"status": {"conditions": [{"type": GATE, "status": "True"}]}}
    kube.core.patch_namespaced_pod_status("gated", "default", own)
    watched(lambda p: getattr(condition(p, "Ready"), "status", None) == "True")
    own["status"]["conditions"][0]["status"] = "False"
    kube.core.patch_namespaced_pod_status("gated", "default", own)
    again = watched(lambda p: getattr(condition(p, "Ready"), "status", None) == "False")
    assert (
        condition(again, "Ready").message
        == f'the status of pod readiness gate "{GATE}" is not "True", but False'
    )
    assert condition(again, GATE).status == "False"  # the owner's condition kept beside the kubelet's
