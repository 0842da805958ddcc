"""kubesim's ReplicaSet scales down as Kubernetes' does, through the scale subresource a surge uses."""

from __future__ import annotations

from collections.abc import Callable

import kubernetes
import pytest

from kubesim.sim import SimHandle
from tests.kube import Kube, client_for, pod_ready, refusal, watch_until

pytestmark = pytest.mark.integration

COST = "controller.kubernetes.io/pod-deletion-cost"


def test_a_scale_down_removes_the_pod_with_the_lowest_deletion_cost_not_the_youngest(
    kubesim_factory: Callable[..., SimHandle],
) -> None:
    kube = client_for(kubesim_factory("small"))
    first = watch_until(
        kube.core.list_namespaced_pod,
        lambda s: len(s) == 3 and all(pod_ready(p) for p in s.values()),
        namespace="default",
        label_selector="app=web",
    )
    scale = kube.apps.read_namespaced_deployment_scale("web", "default")
    kube.apps.replace_namespaced_deployment_scale(
        "web",
        "default",
        {"metadata": {"resourceVersion": scale.metadata.resource_version}, "spec": {"replicas": 4}},
    )
    surged = watch_until(
        kube.core.list_namespaced_pod,
        lambda s: len(s) == 4 and all(pod_ready(p) for p in s.values()),
        namespace="default",
        label_selector="app=web",
    )
    (new,) = set(surged) - set(first)
    oldest = min(first, key=lambda key: first[key].metadata.creation_timestamp)
    old_name = oldest.split("/")[1]
    kube.core.patch_namespaced_pod(old_name, "default", {"metadata": {"annotations": {COST: "-2147483648"}}})
    kube.apps.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": 3}})
    left = watch_until(
        kube.core.list_namespaced_pod,
        lambda s: len(s) == 3 and all(p.metadata.deletion_timestamp is None for p in s.values()),
        namespace="default",
        label_selector="app=web",
    )
    assert oldest not in left
    assert new in left


def test_a_scale_down_first_removes_a_pod_not_placed_yet(kubesim_factory: Callable[..., SimHandle]) -> None:
    """Placement outranks the deletion cost: a pod no node took goes before a running one marked cheapest."""
    kube = client_for(kubesim_factory("small"))
    ready = watch_until(
        kube.core.list_namespaced_pod,
        lambda s: len(s) == 3 and all(pod_ready(p) for p in s.values()),
        namespace="default",
        label_selector="app=web",
    )
    cheap = sorted(ready)[0].split("/")[1]
    kube.core.patch_namespaced_pod(cheap, "default", {"metadata": {"annotations": {COST: "-100"}}})
    for node in kube.core.list_node().items:  # the fourth replica finds no node
        kube.core.patch_node(node.metadata.name, {"spec": {"unschedulable": True}})
    kube.apps.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": 4}})
    grown = watch_until(
        kube.core.list_namespaced_pod,
        lambda s: len(s) == 4 and any(p.status.conditions for p in s.values() if not p.spec.node_name),
        namespace="default",
        label_selector="app=web",
    )
    (extra,) = set(grown) - set(ready)
    kube.apps.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": 3}})
    left = watch_until(
        kube.core.list_namespaced_pod,
        lambda s: extra not in s and len(s) == 3,
        namespace="default",
        label_selector="app=web",
    )
    assert f"default/{cheap}" in left


def test_a_scale_with_a_stale_resource_version_is_refused(kubesim_factory: Callable[..., SimHandle]) -> None:
    kube = client_for(kubesim_factory("small"))
    scale = kube.apps.read_namespaced_deployment_scale("web", "default")
    kube.apps.patch_namespaced_deployment("web", "default", {"metadata": {"annotations": {"touched": "1"}}})
    stale = {"metadata": {"resourceVersion": scale.metadata.resource_version}, "spec": {"replicas": 4}}
    with pytest.raises(kubernetes.client.ApiException) as refused:
        kube.apps.replace_namespaced_deployment_scale("web", "default", stale)
    assert refused.value.status == 409
    assert refusal(refused.value)["message"] == (
        'Operation cannot be fulfilled on deployments.apps "web": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    assert kube.apps.read_namespaced_deployment("web", "default").spec.replicas == 3


ANY_OBJECT = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
# A CloneSet-like workload of a CRD: its scale subresource keeps the replicas where the CRD says.
CLONESETS = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "clonesets.apps.example.io"},
    "spec": {
        "group": "apps.example.io",
        "names": {"kind": "CloneSet", "plural": "clonesets", "singular": "cloneset"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                },
                "subresources": {
                    "status": {},
                    "scale": {
                        "specReplicasPath": ".spec.size",
                        "statusReplicasPath": ".status.observed.replicas",
                        "labelSelectorPath": ".status.labelSelector",
                    },
                },
            }
        ],
    },
}


def test_a_custom_resources_scale_is_read_and_written_where_its_crd_says(
    kubesim_factory: Callable[..., SimHandle],
) -> None:
    kube = client_for(kubesim_factory("small"))
    kube.client("ApiextensionsV1Api").create_custom_resource_definition(CLONESETS)
    where = ("apps.example.io", "v1alpha1", "default", "clonesets")
    body = {"apiVersion": "apps.example.io/v1alpha1", "kind": "CloneSet", "metadata": {"name": "shop"}}
    kube.custom.create_namespaced_custom_object(*where, {**body, "spec": {"size": 3}})
    before = kube.custom.get_namespaced_custom_object_scale(*where, "shop")
    assert (before["spec"]["replicas"], before["status"]["replicas"], before["status"]["selector"]) == (
        3,
        0,
        "",
    )
    status = {"status": {"observed": {"replicas": 2}, "labelSelector": "app=shop"}}
    kube.custom.patch_namespaced_custom_object_status(*where, "shop", status)
    seen = kube.custom.get_namespaced_custom_object_scale(*where, "shop")
    assert (seen["spec"]["replicas"], seen["status"]["replicas"], seen["status"]["selector"]) == (
        3,
        2,
        "app=shop",
    )
    kube.custom.patch_namespaced_custom_object_scale(*where, "shop", {"spec": {"replicas": 5}})
    assert kube.custom.get_namespaced_custom_object(*where, "shop")["spec"] == {"size": 5}


def read_scale(kube: Kube, where: tuple[str, str, str, str]) -> tuple[int, int, str]:
    scale = kube.custom.get_namespaced_custom_object_scale(*where, "shop")
    return scale["spec"]["replicas"], scale["status"]["replicas"], scale["status"]["selector"]


def test_a_replication_controller_keeps_its_pods_and_scales_through_its_scale(
    kubesim_factory: Callable[..., SimHandle],
) -> None:
    kube = client_for(kubesim_factory("small"))
    template = {
        "metadata": {"labels": {"app": "legacy"}},
        "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "100m"}}}]},
    }
    body = {
        "apiVersion": "v1",
        "kind": "ReplicationController",
        "metadata": {"name": "legacy"},
        "spec": {"replicas": 2, "selector": {"app": "legacy"}, "template": template},
    }
    kube.core.create_namespaced_replication_controller("default", body)
    pods = watch_until(
        kube.core.list_namespaced_pod,
        lambda s: len(s) == 2 and all(pod_ready(p) for p in s.values()),
        namespace="default",
        label_selector="app=legacy",
    )
    owner = next(iter(pods.values())).metadata.owner_references[0]
    assert (owner.kind, owner.name, owner.controller) == ("ReplicationController", "legacy", True)
    scale = kube.core.read_namespaced_replication_controller_scale("legacy", "default")
    assert (scale.spec.replicas, scale.status.replicas, scale.status.selector) == (2, 2, "app=legacy")
    kube.core.patch_namespaced_replication_controller_scale("legacy", "default", {"spec": {"replicas": 3}})
    watch_until(
        kube.core.list_namespaced_pod,
        lambda s: len(s) == 3,
        namespace="default",
        label_selector="app=legacy",
    )
    watch_until(  # and its status says so
        kube.core.list_namespaced_replication_controller,
        lambda s: s["default/legacy"].status.replicas == 3,
        namespace="default",
    )
