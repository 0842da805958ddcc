"""kubesim's DaemonSet controller and HorizontalPodAutoscaler type: what a drain meets in real clusters."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import kubernetes
import pytest

from kubesim.sim import SimHandle
from tests.kube import Kube, client_for, pod_ready, refusal, watch_until

pytestmark = pytest.mark.integration


def daemonset(name: str, **pod_spec: Any) -> dict[str, Any]:
    spec = {"containers": [{"name": "agent", "image": "agent:1"}], **pod_spec}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": spec},
        },
    }


def nodes_of(state: dict[str, Any]) -> list[str]:
    return sorted(p.spec.node_name for p in state.values() if p.spec.node_name)


def test_a_daemonset_runs_one_ready_pod_on_each_node_it_selects(
    kubesim_factory: Callable[..., SimHandle],
) -> None:
    kube = client_for(kubesim_factory("small"))
    kube.core.patch_node("node-3", {"metadata": {"labels": {"agent": "off"}}})
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "agent", "operator": "NotIn", "values": ["off"]}]}
                ]
            }
        }
    }
    kube.apps.create_namespaced_daemon_set("default", daemonset("agent", affinity=affinity))
    state = watch_until(
        kube.core.list_namespaced_pod,
        lambda s: len(s) == 2 and all(pod_ready(p) for p in s.values()),
        namespace="default",
        label_selector="app=agent",
    )
    assert nodes_of(state) == ["node-1", "node-2"]
    pod = next(iter(state.values()))
    assert pod.metadata.owner_references[0].kind == "DaemonSet"
    assert pod.metadata.name.startswith("agent-")
    tolerated = {(t.key, t.effect) for t in pod.spec.tolerations}
    assert ("node.kubernetes.io/unschedulable", "NoSchedule") in tolerated
    assert ("node.kubernetes.io/not-ready", "NoExecute") in tolerated
    watch_until(
        kube.apps.list_namespaced_daemon_set,
        lambda s: (
            s["default/agent"].status is not None
            and (s["default/agent"].status.desired_number_scheduled, s["default/agent"].status.number_ready)
            == (2, 2)
        ),
        namespace="default",
    )
    # The node selected again gets its pod; a node selected no more loses it.
    kube.core.patch_node("node-3", {"metadata": {"labels": {"agent": None}}})
    kube.core.patch_node("node-1", {"metadata": {"labels": {"agent": "off"}}})
    state = watch_until(
        kube.core.list_namespaced_pod,
        lambda s: nodes_of(s) == ["node-2", "node-3"] and len(s) == 2,
        namespace="default",
        label_selector="app=agent",
    )


def test_a_cordon_or_a_no_schedule_taint_leaves_a_daemon_pod_running_and_no_execute_removes_it(
    kubesim_factory: Callable[..., SimHandle],
) -> None:
    kube = client_for(kubesim_factory("small"))
    kube.apps.create_namespaced_daemon_set("default", daemonset("agent"))
    watch_until(
        kube.core.list_namespaced_pod,
        lambda s: len(s) == 3 and all(pod_ready(p) for p in s.values()),
        namespace="default",
        label_selector="app=agent",
    )
    kube.core.patch_node("node-1", {"spec": {"unschedulable": True}})
    kube.core.patch_node("node-2", {"spec": {"taints": [{"key": "maintenance", "effect": "NoSchedule"}]}})
    kube.core.patch_node("node-3", {"spec": {"taints": [{"key": "maintenance", "effect": "NoExecute"}]}})
    state = watch_until(
        kube.core.list_namespaced_pod,
        lambda s: nodes_of(s) == ["node-1", "node-2"] and len(s) == 2,
        namespace="default",
        label_selector="app=agent",
    )
    # A deleted daemon pod on the cordoned node comes back (it tolerates the cordon); the tainted one's not.
    for pod in state.values():
        kube.core.delete_namespaced_pod(pod.metadata.name, "default")
    watch_until(
        kube.core.list_namespaced_pod,
        lambda s: nodes_of(s) == ["node-1"] and len(s) == 1 and all(pod_ready(p) for p in s.values()),
        namespace="default",
        label_selector="app=agent",
    )


def hpa(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name},
        "spec": spec,
    }


def test_horizontal_pod_autoscalers_are_stored_listed_and_validated(
    kubesim_factory: Callable[..., SimHandle],
) -> None:
    kube: Kube = client_for(kubesim_factory("small"))
    api: Any = kubernetes.client.AutoscalingV2Api(kube.api)
    target = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
    api.create_namespaced_horizontal_pod_autoscaler(
        "default", hpa("web", scaleTargetRef=target, minReplicas=2, maxReplicas=5)
    )
    listed = api.list_horizontal_pod_autoscaler_for_all_namespaces().items
    assert [(h.metadata.name, h.spec.scale_target_ref.name, h.spec.max_replicas) for h in listed] == [
        ("web", "web", 5)
    ]
    with pytest.raises(kubernetes.client.ApiException) as refused:
        api.create_namespaced_horizontal_pod_autoscaler(
            "default", hpa("bad", scaleTargetRef={"kind": "", "name": ""}, minReplicas=3, maxReplicas=2)
        )
    status = refusal(refused.value)
    assert refused.value.status == 422
    assert status["message"] == (
        'HorizontalPodAutoscaler.autoscaling "bad" is invalid: ['
        "spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`, "
        "spec.scaleTargetRef.kind: Required value, spec.scaleTargetRef.name: Required value]"
    )
