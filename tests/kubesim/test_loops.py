"""kubesim's control loops: what migration depends on behaves as a real cluster's controllers do."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import kubernetes
import pytest

from kubesim.sim import SimHandle
from tests.kube import Kube, client_for, pod_ready, refusal, watch_until, with_crds

pytestmark = pytest.mark.integration

GROUP, VERSION = "scheduling.koordinator.sh", "v1alpha1"


def reservation(
    name: str,
    cpu: str,
    owners: list[dict[str, Any]],
    node: str | None = None,
    exclude: str | None = None,
    ttl: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
        "schedulerName": "koord-scheduler",
    }
    if node:
        spec["nodeName"] = node
    if exclude:
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": [exclude]}]}
                    ]
                }
            }
        }
    body: dict[str, Any] = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Reservation",
        "metadata": {"name": name},
        "spec": {"template": {"spec": spec}, "owners": owners, "allocateOnce": True},
    }
    if ttl:
        body["spec"]["ttl"] = ttl
    return body


def reserve_for_owner(
    kube: Kube, name: str, pod: Any, node: str | None = None, exclude: str | None = None
) -> None:
    """A 1-CPU Reservation for the replacement of `pod`: owned by the pod's controller (its ReplicaSet)."""
    ref = pod.metadata.owner_references[0]
    owner = {
        "controller": {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": ref.name,
            "uid": ref.uid,
            "namespace": "default",
        }
    }
    kube.custom.create_cluster_custom_object(
        GROUP, VERSION, "reservations", reservation(name, "1", [owner], node=node, exclude=exclude)
    )


def wait_reservation(kube: Kube, name: str, phases: set[str]) -> dict[str, Any]:
    state = watch_until(
        kube.custom.list_cluster_custom_object,
        lambda s: (s.get(f"/{name}") or {}).get("status", {}).get("phase") in phases,
        group=GROUP,
        version=VERSION,
        plural="reservations",
    )
    return state[f"/{name}"]  # type: ignore[no-any-return]


def test_deleted_deployment_pod_is_replaced(kubesim_factory: Callable[..., SimHandle]) -> None:
    kube = client_for(kubesim_factory("small"))
    pods = kube.core.list_namespaced_pod("default", label_selector="app=web").items
    victim = pods[0].metadata.name
    kube.core.delete_namespaced_pod(victim, "default")
    state = watch_until(
        kube.core.list_namespaced_pod,
        lambda s: len(s) == 3 and f"default/{victim}" not in s and all(pod_ready(p) for p in s.values()),
        namespace="default",
        label_selector="app=web",
    )
    assert all(p.spec.node_name for p in state.values())
    deploy = watch_until(
        kube.apps.list_namespaced_deployment,
        lambda s: s["default/web"].status.available_replicas == 3,
        namespace="default",
    )
    assert deploy["default/web"].status.updated_replicas == 3


def test_rollout_and_scaling(kubesim_factory: Callable[..., SimHandle]) -> None:
    kube = client_for(kubesim_factory("small"))
    kube.apps.patch_namespaced_deployment(
        "web", "default", {"spec": {"replicas": 4, "template": {"metadata": {"annotations": {"rev": "2"}}}}}
    )
    state = watch_until(
        kube.core.list_namespaced_pod,
        lambda s: (
            len(s) == 4
            and all(pod_ready(p) and (p.metadata.annotations or {}).get("rev") == "2" for p in s.values())
        ),
        timeout=30,
        namespace="default",
        label_selector="app=web",
    )
    assert len({p.metadata.labels["pod-template-hash"] for p in state.values()}) == 1
    sets = kube.apps.list_namespaced_replica_set("default").items
    assert sorted(rs.spec.replicas for rs in sets) == [0, 4]


def test_statefulset_keeps_names(kube: Kube) -> None:
    kube.core.create_node({"metadata": {"name": "n1"}, "status": {"capacity": {"cpu": "8", "pods": "110"}}})
    selector = {"matchLabels": {"app": "db"}}
    template = {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    kube.apps.create_namespaced_stateful_set(
        "default",
        {
            "metadata": {"name": "db"},
            "spec": {"replicas": 3, "selector": selector, "template": template, "serviceName": "db"},
        },
    )
    watch_until(
        kube.core.list_namespaced_pod,
        lambda s: (
            sorted(s) == ["default/db-0", "default/db-1", "default/db-2"]
            and all(pod_ready(p) for p in s.values())
        ),
        namespace="default",
        label_selector="app=db",
    )
    old_uid = kube.core.read_namespaced_pod("db-1", "default").metadata.uid
    kube.core.delete_namespaced_pod("db-1", "default")
    watch_until(
        kube.core.list_namespaced_pod,
        lambda s: (
            "default/db-1" in s and s["default/db-1"].metadata.uid != old_uid and pod_ready(s["default/db-1"])
        ),
        namespace="default",
        label_selector="app=db",
    )
    kube.apps.patch_namespaced_stateful_set_scale("db", "default", {"spec": {"replicas": 1}})
    watch_until(
        kube.core.list_namespaced_pod,
        lambda s: sorted(s) == ["default/db-0"],
        namespace="default",
        label_selector="app=db",
    )


def test_node_not_ready_stops_readiness_and_termination(kubesim_factory: Callable[..., SimHandle]) -> None:
    kube = client_for(kubesim_factory("small"))
    pod = kube.core.list_namespaced_pod("default", label_selector="app=web").items[0]
    node = pod.spec.node_name
    kube.core.patch_node_status(
        node, {"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "KubeletStopped"}]}}
    )
    watch_until(
        kube.core.list_namespaced_pod,
        lambda s: not pod_ready(s[f"default/{pod.metadata.name}"]),
        namespace="default",
    )
    kube.core.delete_namespaced_pod(pod.metadata.name, "default")
    # An unreachable kubelet never confirms: the pod stays Terminating until the node is back.
    watch_until(
        kube.core.list_namespaced_pod,
        lambda s: sum(1 for p in s.values() if p.metadata.labels.get("app") == "web" and pod_ready(p)) == 3,
        namespace="default",
    )
    assert kube.core.read_namespaced_pod(pod.metadata.name, "default").metadata.deletion_timestamp is not None
    kube.core.patch_node_status(
        node, {"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}
    )
    watch_until(
        kube.core.list_namespaced_pod, lambda s: f"default/{pod.metadata.name}" not in s, namespace="default"
    )


def test_a_finalizer_holds_a_deleted_pod_after_its_kubelet_confirmed(
    kubesim_factory: Callable[..., SimHandle],
) -> None:
    # As kube-apiserver and the kubelet: the kubelet's last delete (no grace) removes the pod unless a
    # finalizer remains; the pod then waits, with a grace period of 0, until the finalizer is removed.
    kube = client_for(kubesim_factory("small"))
    name = kube.core.list_namespaced_pod("default", label_selector="app=web").items[0].metadata.name
    kube.core.patch_namespaced_pod(name, "default", {"metadata": {"finalizers": ["example.com/hold"]}})
    kube.core.delete_namespaced_pod(name, "default")
    state = watch_until(
        kube.core.list_namespaced_pod,
        lambda s: s[f"default/{name}"].metadata.deletion_grace_period_seconds == 0,
        namespace="default",
    )
    assert state[f"default/{name}"].metadata.deletion_timestamp is not None
    kube.core.patch_namespaced_pod(name, "default", {"metadata": {"finalizers": None}})
    watch_until(kube.core.list_namespaced_pod, lambda s: f"default/{name}" not in s, namespace="default")


def test_reservation_unschedulable_on_a_full_cluster(kubesim_factory: Callable[..., SimHandle]) -> None:
    kube = with_crds(client_for(kubesim_factory("fragmented")))
    kube.custom.create_cluster_custom_object(
        GROUP,
        VERSION,
        "reservations",
        reservation("too-big", "5", [{"object": {"namespace": "default", "name": "x"}}]),
    )
    state = watch_until(
        kube.custom.list_cluster_custom_object,
        lambda s: any(
            c.get("reason") == "Unschedulable"
            for c in (s.get("/too-big") or {}).get("status", {}).get("conditions", [])
        ),
        group=GROUP,
        version=VERSION,
        plural="reservations",
    )
    status = state["/too-big"]["status"]
    assert status["phase"] == "Pending"
    [scheduled] = [c for c in status["conditions"] if c["type"] == "Scheduled"]
    assert (
        scheduled["status"] == "False"
        and "0/6 nodes are available: 6 Insufficient cpu" in scheduled["message"]
    )


def test_reservation_on_a_free_node_and_its_room_is_held(kubesim_factory: Callable[..., SimHandle]) -> None:
    kube = with_crds(client_for(kubesim_factory("fragmented")))
    kube.custom.create_cluster_custom_object(
        GROUP,
        VERSION,
        "reservations",
        reservation("hold", "2", [{"object": {"namespace": "default", "name": "owner"}}], node="node-3"),
    )
    held = wait_reservation(kube, "hold", {"Available"})
    assert held["status"]["nodeName"] == "node-3"
    assert {c["type"]: c["status"] for c in held["status"]["conditions"]} == {
        "Scheduled": "True",
        "Ready": "True",
    }
    # node-3 has no room left for anyone else (2 used + 2 reserved of 4)...
    kube.core.create_namespaced_pod(
        "default",
        {
            "metadata": {"name": "intruder"},
            "spec": {
                "nodeSelector": {"kubernetes.io/hostname": "node-3"},
                "schedulerName": "koord-scheduler",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
            },
        },
    )
    # ...but the owner lands in it.
    kube.core.create_namespaced_pod(
        "default",
        {
            "metadata": {"name": "owner"},
            "spec": {
                "schedulerName": "koord-scheduler",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}],
            },
        },
    )
    state = watch_until(
        kube.core.list_namespaced_pod,
        lambda s: (
            s["default/owner"].spec.node_name is not None and (s["default/intruder"].status.conditions or [])
        ),
        namespace="default",
    )
    owner = state["default/owner"]
    assert owner.spec.node_name == "node-3"
    allocated = json.loads(owner.metadata.annotations["scheduling.koordinator.sh/reservation-allocated"])
    assert allocated["name"] == "hold" and allocated["uid"] == held["metadata"]["uid"]
    intruder = state["default/intruder"]
    assert intruder.spec.node_name is None and intruder.status.conditions[0].reason == "Unschedulable"
    done = wait_reservation(kube, "hold", {"Succeeded"})
    assert done["status"]["currentOwners"] == [
        {"namespace": "default", "name": "owner", "uid": owner.metadata.uid}
    ]
    assert done["status"]["allocated"] == {"cpu": "2"}


def test_reservation_expires_and_frees_its_room(kubesim_factory: Callable[..., SimHandle]) -> None:
    kube = with_crds(client_for(kubesim_factory("fragmented")))
    kube.custom.create_cluster_custom_object(
        GROUP,
        VERSION,
        "reservations",
        reservation(
            "brief", "2", [{"object": {"namespace": "default", "name": "nobody"}}], node="node-1", ttl="1s"
        ),
    )
    expired = wait_reservation(kube, "brief", {"Failed"})
    ready = next(c for c in expired["status"]["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "Expired")


def _web_pod_on(kube: Kube, node: str) -> Any:
    return next(
        p
        for p in kube.core.list_namespaced_pod("default", label_selector="app=web").items
        if p.spec.node_name == node
    )


def test_replacement_of_an_evicted_pod_lands_in_its_reservation(
    kubesim_factory: Callable[..., SimHandle],
) -> None:
    kube = with_crds(client_for(kubesim_factory("fragmented")))
    victim = _web_pod_on(kube, "node-1")
    reserve_for_owner(kube, "move-web", victim, exclude="node-1")
    target = wait_reservation(kube, "move-web", {"Available"})["status"]["nodeName"]
    assert target != "node-1"
    kube.core.create_namespaced_pod_eviction(
        victim.metadata.name, "default", {"metadata": {"name": victim.metadata.name, "namespace": "default"}}
    )
    state = watch_until(
        kube.core.list_namespaced_pod,
        lambda s: any(
            p.metadata.uid != victim.metadata.uid
            and p.spec.node_name
            and pod_ready(p)
            and "scheduling.koordinator.sh/reservation-allocated" in (p.metadata.annotations or {})
            for p in s.values()
        ),
        namespace="default",
        label_selector="app=web",
    )
    replacement = next(
        p
        for p in state.values()
        if "scheduling.koordinator.sh/reservation-allocated" in (p.metadata.annotations or {})
    )
    assert replacement.spec.node_name == target
    assert wait_reservation(kube, "move-web", {"Succeeded"})["status"]["currentOwners"][0]["name"] == (
        replacement.metadata.name
    )


def _race(kube: Kube, reserve_first: bool) -> tuple[str | None, str | None]:
    """Move node-1's web pod into node-2's free room while a higher-priority pod wants that same room.

    Returns (where the replacement went, where the competitor went).
    """
    victim = _web_pod_on(kube, "node-1")
    if reserve_first:
        reserve_for_owner(kube, "move-web", victim, node="node-2")
        wait_reservation(kube, "move-web", {"Available"})
    kube.core.create_namespaced_pod(
        "default",
        {
            "metadata": {"name": "competitor"},
            "spec": {
                "schedulerName": "koord-scheduler",
                "priority": 1000,
                "nodeSelector": {"kubernetes.io/hostname": "node-2"},
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}],
            },
        },
    )
    watch_until(
        kube.core.list_namespaced_pod,
        lambda s: bool(s["default/competitor"].spec.node_name or s["default/competitor"].status.conditions),
        namespace="default",
    )
    before = {
        p.metadata.uid for p in kube.core.list_namespaced_pod("default", label_selector="app=web").items
    }
    kube.core.create_namespaced_pod_eviction(
        victim.metadata.name, "default", {"metadata": {"name": victim.metadata.name, "namespace": "default"}}
    )

    def new_web(s: dict[str, Any]) -> list[Any]:
        return [
            p
            for p in s.values()
            if (p.metadata.labels or {}).get("app") == "web" and p.metadata.uid not in before
        ]

    state = watch_until(
        kube.core.list_namespaced_pod,
        lambda s: len(new_web(s)) == 1 and bool(new_web(s)[0].spec.node_name),
        namespace="default",
    )
    [replacement] = new_web(state)
    return replacement.spec.node_name, state["default/competitor"].spec.node_name


def test_without_a_reservation_a_competing_pod_takes_the_room(
    kubesim_factory: Callable[..., SimHandle],
) -> None:
    # The very race PodMigrationJob exists to prevent (Koordinator's guide): the room the migration counted on
    # is taken by another pod first, so the replacement lands wherever is left (here, back where it was).
    kube = with_crds(client_for(kubesim_factory("fragmented")))
    replacement_node, competitor_node = _race(kube, reserve_first=False)
    assert competitor_node == "node-2"
    assert replacement_node != "node-2"


def test_with_a_reservation_the_replacement_keeps_its_room(kubesim_factory: Callable[..., SimHandle]) -> None:
    kube = with_crds(client_for(kubesim_factory("fragmented")))
    replacement_node, competitor_node = _race(kube, reserve_first=True)
    assert replacement_node == "node-2"
    assert competitor_node is None  # it waits: the room was reserved


def test_a_deleted_namespace_terminates_its_content_then_goes(
    kubesim_factory: Callable[..., SimHandle],
) -> None:
    handle = kubesim_factory("small")
    kube = client_for(handle)
    kube.core.create_namespace({"metadata": {"name": "shop"}})
    assert kube.core.read_namespace("shop").spec.finalizers == ["kubernetes"]
    node = kube.core.list_node().items[0].metadata.name
    pod = {
        "metadata": {"name": "web"},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]},
    }
    kube.core.create_namespaced_pod("shop", pod)
    kube.core.create_namespaced_config_map("shop", {"metadata": {"name": "settings"}})
    kube.core.delete_namespace("shop")  # the pod's kubelet confirms its end after its grace period
    terminating = kube.core.read_namespace("shop")
    assert terminating.status.phase == "Terminating" and terminating.metadata.deletion_timestamp is not None
    with pytest.raises(kubernetes.client.ApiException) as refused:
        kube.core.create_namespaced_config_map("shop", {"metadata": {"name": "late"}})
    status = refusal(refused.value)
    assert (refused.value.status, status["reason"], status["message"]) == (
        403,
        "Forbidden",
        'configmaps "late" is forbidden: unable to create new content in namespace shop because it is being'
        " terminated",
    )
    assert status["details"]["causes"] == [
        {
            "reason": "NamespaceTerminating",
            "message": "namespace shop is being terminated",
            "field": "metadata.namespace",
        }
    ]
    # Listed, then followed from the list's version: on a busy machine it may be gone before the list.
    listing = kube.core.list_namespace()
    if "shop" in {n.metadata.name for n in listing.items}:
        watch = kubernetes.watch.Watch()
        events = watch.stream(
            kube.core.list_namespace, resource_version=listing.metadata.resource_version, timeout_seconds=60
        )
        try:
            deleted = next(
                (e for e in events if e["type"] == "DELETED" and e["object"].metadata.name == "shop"), None
            )
        finally:
            watch.stop()
            events.close()  # the stream's connection with it
        assert deleted is not None, "namespace shop was not deleted within 60 s"
    assert kube.core.list_namespaced_pod("shop").items == []
    assert kube.core.list_namespaced_config_map("shop").items == []
    with pytest.raises(kubernetes.client.ApiException) as immortal:
        kube.core.delete_namespace("default")
    assert (immortal.value.status, refusal(immortal.value)["message"]) == (
        403,
        'namespaces "default" is forbidden: this namespace may not be deleted',
    )


def placed_pod(name: str) -> Callable[[dict[str, Any]], bool]:
    def placed(state: dict[str, Any]) -> bool:
        pod = state.get(f"default/{name}")
        return bool(pod and pod.spec.node_name)

    return placed


def test_on_a_large_cluster_each_pod_looks_at_enough_nodes_from_where_the_last_search_stopped(
    kubesim_factory: Callable[..., SimHandle],
) -> None:
    # 250 equal nodes: kube-scheduler looks for max(100, 250 * (50 - 250 // 125)%) = 120 feasible nodes, the
    # first search from the first node, the next from where that one stopped.
    capacity = {"cpu": "4", "memory": "16Gi", "pods": "110"}
    scenario = {"name": "wide", "nodes": [{"name": "node-{i}", "count": 250, "capacity": capacity}]}
    kube = client_for(kubesim_factory(scenario))
    for name in ("first", "second"):
        kube.core.create_namespaced_pod(
            "default",
            {
                "metadata": {"name": name},
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
            },
        )
        watch_until(kube.core.list_namespaced_pod, placed_pod(name), namespace="default")
    placed = {p.metadata.name: p.spec.node_name for p in kube.core.list_namespaced_pod("default").items}
    # Equal scores go to the first name; a search of every node would have put the second pod on node-10.
    assert placed == {"first": "node-1", "second": "node-121"}


def test_a_pod_matching_several_reservations_takes_the_oldest_order_first(
    kubesim_factory: Callable[..., SimHandle],
) -> None:
    kube = with_crds(client_for(kubesim_factory("fragmented")))
    owners = [{"labelSelector": {"matchLabels": {"app": "mover"}}}]
    for name, node, order in (("a-room", "node-2", "2000"), ("b-room", "node-3", "1000")):
        body = reservation(name, "100m", owners, node=node)
        body["metadata"]["labels"] = {"scheduling.koordinator.sh/reservation-order": order}
        kube.custom.create_cluster_custom_object(GROUP, VERSION, "reservations", body)
        wait_reservation(kube, name, {"Available"})
    taken = []
    for pod in ("mover-1", "mover-2"):
        kube.core.create_namespaced_pod(
            "default",
            {
                "metadata": {"name": pod, "labels": {"app": "mover"}},
                "spec": {
                    "schedulerName": "koord-scheduler",
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}],
                },
            },
        )
        key = f"default/{pod}"

        def placed(state: dict[str, Any], key: str = key) -> bool:
            return bool(state[key].spec.node_name)

        state = watch_until(kube.core.list_namespaced_pod, placed, namespace="default")
        annotations = state[key].metadata.annotations or {}
        taken.append(json.loads(annotations["scheduling.koordinator.sh/reservation-allocated"])["name"])
    assert taken == ["b-room", "a-room"]  # the lower order first, though its name sorts after
