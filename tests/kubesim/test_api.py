"""kubesim speaks the Kubernetes REST protocol: exercised with the official `kubernetes` client only."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import kubernetes
import pytest
from kubernetes.client import ApiException

from kubesim.sim import SimHandle
from tests.kube import Kube, client_for, refusal, watch_until

pytestmark = pytest.mark.integration

GROUP, VERSION = "scheduling.koordinator.sh", "v1alpha1"


def pod_body(
    name: str,
    cpu: str = "100m",
    node: str | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    scheduler: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "image": "pause", "resources": {"requests": {"cpu": cpu}}}]
    }
    if node:
        spec["nodeName"] = node
    if scheduler:
        spec["schedulerName"] = scheduler
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}},
        "spec": spec,
    }


def node_body(name: str, cpu: str = "4") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"capacity": {"cpu": cpu, "memory": "16Gi", "pods": "110"}},
    }


def error_of(call: Callable[[], Any]) -> ApiException:
    with pytest.raises(ApiException) as err:
        call()
    return err.value


# ---------------------------------------------------------------------------------------------------------
# CRUD on every resource


def test_core_crud(kube: Kube) -> None:
    core = kube.core
    core.create_namespace({"metadata": {"name": "team-a"}})
    assert core.read_namespace("team-a").status.phase == "Active"
    core.create_node(node_body("n1"))
    node = core.read_node("n1")
    assert node.metadata.uid and node.metadata.creation_timestamp and node.metadata.resource_version
    assert node.metadata.labels["kubernetes.io/hostname"] == "n1"
    created = core.create_namespaced_pod("team-a", pod_body("p1", labels={"app": "a"}))
    assert created.metadata.generation == 1 and created.status.phase == "Pending"
    assert created.spec.scheduler_name == "default-scheduler" and created.status.qos_class == "Burstable"
    patched = core.patch_namespaced_pod("p1", "team-a", {"metadata": {"labels": {"tier": "x"}}})
    assert patched.metadata.labels == {"app": "a", "tier": "x"}
    assert int(patched.metadata.resource_version) > int(created.metadata.resource_version)
    core.create_namespaced_event(
        "team-a",
        {
            "metadata": {"name": "e1"},
            "involvedObject": {"kind": "Pod", "name": "p1"},
            "reason": "Test",
            "message": "m",
        },
    )
    assert core.read_namespaced_event("e1", "team-a").reason == "Test"
    core.create_namespaced_config_map("team-a", {"metadata": {"name": "cm"}, "data": {"k": "v"}})
    assert core.read_namespaced_config_map("cm", "team-a").data == {"k": "v"}
    core.delete_namespaced_config_map("cm", "team-a")
    assert error_of(lambda: core.read_namespaced_config_map("cm", "team-a")).status == 404


def test_apps_policy_coordination_crud(kube: Kube) -> None:
    selector = {"matchLabels": {"app": "w"}}
    template = {"metadata": {"labels": {"app": "w"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    deploy = kube.apps.create_namespaced_deployment(
        "default", {"metadata": {"name": "w"}, "spec": {"selector": selector, "template": template}}
    )
    assert deploy.spec.replicas == 1 and deploy.spec.strategy.rolling_update.max_surge == "25%"
    kube.apps.create_namespaced_replica_set(
        "default",
        {"metadata": {"name": "rs"}, "spec": {"replicas": 0, "selector": selector, "template": template}},
    )
    sts = kube.apps.create_namespaced_stateful_set(
        "default",
        {
            "metadata": {"name": "db"},
            "spec": {"replicas": 1, "selector": selector, "template": template, "serviceName": "db"},
        },
    )
    assert sts.spec.pod_management_policy == "OrderedReady"
    scale = kube.apps.read_namespaced_stateful_set_scale("db", "default")
    assert scale.spec.replicas == 1
    kube.apps.patch_namespaced_stateful_set_scale("db", "default", {"spec": {"replicas": 3}})
    assert kube.apps.read_namespaced_stateful_set("db", "default").spec.replicas == 3
    pdb = kube.policy.create_namespaced_pod_disruption_budget(
        "default", {"metadata": {"name": "w"}, "spec": {"selector": selector, "minAvailable": 1}}
    )
    assert pdb.spec.min_available == 1
    coordination = kube.client("CoordinationV1Api")
    coordination.create_namespaced_lease(
        "default", {"metadata": {"name": "leader"}, "spec": {"holderIdentity": "a"}}
    )
    assert coordination.read_namespaced_lease("leader", "default").spec.holder_identity == "a"
    assert {d.metadata.name for d in kube.apps.list_deployment_for_all_namespaces().items} == {"w"}


def test_custom_resources_from_crds(kube: Kube) -> None:
    pmj = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PodMigrationJob",
        "metadata": {"name": "j1"},
        "spec": {"podRef": {"namespace": "default", "name": "p"}, "mode": "ReservationFirst"},
        "status": {"phase": "Succeeded"},
    }
    created = kube.custom.create_cluster_custom_object(GROUP, VERSION, "podmigrationjobs", pmj)
    assert "status" not in created  # status subresource: ignored on create
    assert created["metadata"]["uid"] and created["metadata"]["generation"] == 1
    kube.custom.patch_cluster_custom_object_status(
        GROUP, VERSION, "podmigrationjobs", "j1", {"status": {"phase": "Running"}}
    )
    # A main-resource write cannot change status; a /status write cannot change spec.
    updated = kube.custom.patch_cluster_custom_object(
        GROUP, VERSION, "podmigrationjobs", "j1", {"spec": {"paused": True}, "status": {"phase": "Failed"}}
    )
    assert updated["spec"]["paused"] is True and updated["status"]["phase"] == "Running"
    assert updated["metadata"]["generation"] == 2
    after_status = kube.custom.patch_cluster_custom_object_status(
        GROUP, VERSION, "podmigrationjobs", "j1", {"spec": {"paused": False}, "status": {"phase": "Aborted"}}
    )
    assert after_status["spec"]["paused"] is True and after_status["status"]["phase"] == "Aborted"
    assert after_status["metadata"]["generation"] == 2  # status writes do not bump generation
    reservation = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Reservation",
        "metadata": {"name": "r1"},
        "spec": {
            "template": {"spec": {"containers": [{"name": "c"}]}},
            "owners": [{"object": {"namespace": "default", "name": "p"}}],
        },
    }
    kube.custom.create_cluster_custom_object(GROUP, VERSION, "reservations", reservation)
    listed = kube.custom.list_cluster_custom_object(GROUP, VERSION, "reservations")
    assert [r["metadata"]["name"] for r in listed["items"]] == ["r1"]
    kube.custom.delete_cluster_custom_object(GROUP, VERSION, "podmigrationjobs", "j1")
    assert (
        error_of(
            lambda: kube.custom.get_cluster_custom_object(GROUP, VERSION, "podmigrationjobs", "j1")
        ).status
        == 404
    )
    # Removing the CRD removes the resource.
    kubernetes.client.ApiextensionsV1Api(kube.api).delete_custom_resource_definition(
        "reservations.scheduling.koordinator.sh"
    )
    assert (
        error_of(lambda: kube.custom.list_cluster_custom_object(GROUP, VERSION, "reservations")).status == 404
    )


def test_strategic_merge_and_json_patch(kube: Kube) -> None:
    body = pod_body("p")
    body["spec"]["containers"].append({"name": "side", "image": "s"})
    kube.core.create_namespaced_pod("default", body)
    # strategic merge: containers merge by name
    status, _ = raw_request(
        kube,
        "PATCH",
        "/api/v1/namespaces/default/pods/p",
        {"spec": {"containers": [{"name": "side", "image": "s2"}]}},
        "application/strategic-merge-patch+json",
    )
    assert status == 200
    pod = kube.core.read_namespaced_pod("p", "default")
    assert [(c.name, c.image) for c in pod.spec.containers] == [("main", "pause"), ("side", "s2")]
    kube.core.patch_namespaced_pod(
        "p", "default", [{"op": "add", "path": "/metadata/labels/x", "value": "1"}]
    )
    assert kube.core.read_namespaced_pod("p", "default").metadata.labels["x"] == "1"
    # strategic merge on a custom resource is refused, as the API server does
    kube.custom.create_cluster_custom_object(
        GROUP,
        VERSION,
        "podmigrationjobs",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "PodMigrationJob",
            "metadata": {"name": "j"},
            "spec": {"podRef": {"namespace": "default", "name": "p"}},
        },
    )
    answer = raw_request(
        kube,
        "PATCH",
        f"/apis/{GROUP}/{VERSION}/podmigrationjobs/j",
        {"spec": {"paused": True}},
        "application/strategic-merge-patch+json",
    )
    assert answer[0] == 415


def raw_request(
    kube: Kube,
    method: str,
    path: str,
    body: Any = None,
    content_type: str = "application/json",
    query: str = "",
) -> tuple[int, Any]:
    """A request outside the typed client, returning (status, decoded body)."""
    import urllib.request

    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        kube.handle.url + path + query,
        data=data,
        method=method,
        headers={"Content-Type": content_type, "Accept": "application/json", **kube.handle.admin_headers},
    )
    try:
        with urllib.request.urlopen(request, timeout=10, context=kube.handle.ssl_context) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"null")


# ---------------------------------------------------------------------------------------------------------
# Semantics


def test_conflicts(kube: Kube) -> None:
    kube.core.create_namespaced_pod("default", pod_body("p"))
    again = error_of(lambda: kube.core.create_namespaced_pod("default", pod_body("p")))
    assert again.status == 409 and refusal(again)["reason"] == "AlreadyExists"
    stale = kube.core.read_namespaced_pod("p", "default")
    kube.core.patch_namespaced_pod("p", "default", {"metadata": {"labels": {"a": "1"}}})
    stale.metadata.labels = {"b": "2"}
    conflict = error_of(lambda: kube.core.replace_namespaced_pod("p", "default", stale))
    assert conflict.status == 409 and refusal(conflict)["reason"] == "Conflict"
    assert "the object has been modified" in refusal(conflict)["message"]
    missing_ns = error_of(lambda: kube.core.create_namespaced_pod("nowhere", pod_body("q")))
    assert missing_ns.status == 404
    invalid = error_of(
        lambda: kube.core.create_namespaced_pod(
            "default", {"metadata": {"name": "Bad_Name"}, "spec": {"containers": [{"name": "c"}]}}
        )
    )
    assert invalid.status == 422 and refusal(invalid)["reason"] == "Invalid"


def test_selectors_and_pagination(kube: Kube) -> None:
    kube.core.create_node(node_body("n1"))
    for i in range(25):
        kube.core.create_namespaced_pod(
            "default",
            pod_body(
                f"p{i:02d}",
                labels={"app": "a" if i % 2 else "b", "i": str(i)},
                node="n1" if i < 5 else None,
                scheduler="manual",
            ),
        )
    assert len(kube.core.list_namespaced_pod("default", label_selector="app=a").items) == 12
    assert (
        len(kube.core.list_namespaced_pod("default", label_selector="app in (a,b),i notin (1,2)").items) == 23
    )
    assert len(kube.core.list_namespaced_pod("default", label_selector="!i").items) == 0
    assert [
        p.metadata.name
        for p in kube.core.list_namespaced_pod("default", field_selector="metadata.name=p07").items
    ] == ["p07"]
    on_node = kube.core.list_pod_for_all_namespaces(field_selector="spec.nodeName=n1")
    assert sorted(p.metadata.name for p in on_node.items) == [f"p{i:02d}" for i in range(5)]
    assert len(kube.core.list_namespaced_pod("default", field_selector="spec.nodeName!=n1").items) == 20
    bad = error_of(lambda: kube.core.list_namespaced_pod("default", field_selector="spec.hostname=x"))
    assert bad.status == 400
    names: list[str] = []
    token = None
    pages = 0
    while True:
        page = kube.core.list_namespaced_pod("default", limit=10, _continue=token)
        names.extend(p.metadata.name for p in page.items)
        pages += 1
        token = page.metadata._continue
        if not token:
            break
        assert page.metadata.remaining_item_count == 25 - len(names)
    assert pages == 3 and names == sorted(f"p{i:02d}" for i in range(25))


def test_watch_resumes_from_a_resource_version(kube: Kube) -> None:
    kube.core.create_namespaced_pod("default", pod_body("before", scheduler="manual"))
    rv = kube.core.list_namespaced_pod("default").metadata.resource_version
    kube.core.create_namespaced_pod("default", pod_body("after-1", scheduler="manual"))
    kube.core.delete_namespaced_pod("before", "default")
    kube.core.create_namespaced_pod("default", pod_body("after-2", scheduler="manual"))
    watch = kubernetes.watch.Watch()
    seen = []
    for event in watch.stream(
        kube.core.list_namespaced_pod, "default", resource_version=rv, timeout_seconds=1
    ):
        seen.append((event["type"], event["object"].metadata.name))
        if len(seen) == 3:
            watch.stop()
    assert seen == [("ADDED", "after-1"), ("DELETED", "before"), ("ADDED", "after-2")]


def test_watch_bookmarks_and_timeout(kubesim_factory: Callable[..., SimHandle]) -> None:
    kube = client_for(kubesim_factory(bookmark_interval=0.2))
    rv = kube.core.list_namespaced_pod("default").metadata.resource_version
    response = kube.core.list_namespaced_pod(
        "default",
        watch=True,
        resource_version=rv,
        allow_watch_bookmarks=True,
        timeout_seconds=3,
        _preload_content=False,
    )
    lines = [json.loads(line) for line in response.read().splitlines() if line.strip()]
    assert response.status == 200
    bookmarks = [e for e in lines if e["type"] == "BOOKMARK"]
    assert len(bookmarks) >= 2  # one every 0.2 s over a 3 s watch that then ends by itself
    assert all(int(b["object"]["metadata"]["resourceVersion"]) >= int(rv) for b in bookmarks)


def test_a_watch_without_a_timeout_ends_after_the_minimum_request_timeout(
    kubesim_factory: Callable[..., SimHandle],
) -> None:
    """As kube-apiserver does with --min-request-timeout: between once and twice it, at random."""
    kube = client_for(kubesim_factory(min_request_timeout=0.5))
    started = time.monotonic()
    response = kube.core.list_namespaced_config_map("default", watch=True, _preload_content=False)
    response.read()
    assert response.status == 200 and 0.5 <= time.monotonic() - started < 5


def test_410_gone_after_compaction(kube: Kube) -> None:
    kube.core.create_namespaced_pod("default", pod_body("a", scheduler="manual"))
    rv = kube.core.list_namespaced_pod("default").metadata.resource_version
    kube.core.create_namespaced_pod("default", pod_body("b", scheduler="manual"))
    first_page = kube.core.list_namespaced_pod("default", limit=1)
    assert first_page.metadata._continue
    kube.core.create_namespaced_pod("default", pod_body("c", scheduler="manual"))
    kube.handle.call(lambda sim: sim.store.compact())
    response = kube.core.list_namespaced_pod(
        "default", watch=True, resource_version=rv, timeout_seconds=1, _preload_content=False
    )
    assert response.status == 200
    [event] = [json.loads(line) for line in response.read().splitlines() if line.strip()]
    assert (
        event["type"] == "ERROR" and event["object"]["code"] == 410 and event["object"]["reason"] == "Expired"
    )
    expired = error_of(
        lambda: kube.core.list_namespaced_pod("default", limit=1, _continue=first_page.metadata._continue)
    )
    assert expired.status == 410
    # The client's own watch helper surfaces it as an ApiException(410) after its single retry.
    with pytest.raises(ApiException) as err:
        for _ in kubernetes.watch.Watch().stream(
            kube.core.list_namespaced_pod, "default", resource_version=rv, timeout_seconds=1
        ):
            pass
    assert err.value.status == 410


def test_delete_with_grace_finalizers_and_preconditions(kube: Kube) -> None:
    kube.core.create_node(node_body("n1"))
    pod = kube.core.create_namespaced_pod("default", pod_body("p", node="n1"))
    wrong = error_of(
        lambda: kube.core.delete_namespaced_pod(
            "p", "default", body={"preconditions": {"uid": "not-the-uid"}}
        )
    )
    assert wrong.status == 409 and "Precondition failed" in refusal(wrong)["message"]
    deleting = kube.core.delete_namespaced_pod(
        "p", "default", body={"preconditions": {"uid": pod.metadata.uid}, "gracePeriodSeconds": 30}
    )
    assert (
        deleting.metadata.deletion_timestamp is not None
        and deleting.metadata.deletion_grace_period_seconds == 30
    )
    watch_until(kube.core.list_namespaced_pod, lambda s: "default/p" not in s, namespace="default")
    cm = kube.core.create_namespaced_config_map(
        "default", {"metadata": {"name": "held", "finalizers": ["x/y"]}}
    )
    held = kube.core.delete_namespaced_config_map("held", "default")
    assert kube.core.read_namespaced_config_map("held", "default").metadata.deletion_timestamp is not None
    assert cm.metadata.uid == kube.core.read_namespaced_config_map("held", "default").metadata.uid
    assert held is not None
    kube.core.patch_namespaced_config_map("held", "default", {"metadata": {"finalizers": None}})
    assert error_of(lambda: kube.core.read_namespaced_config_map("held", "default")).status == 404


def test_dry_run_changes_nothing(kube: Kube) -> None:
    kube.core.create_namespaced_pod("default", pod_body("p"), dry_run="All")
    assert error_of(lambda: kube.core.read_namespaced_pod("p", "default")).status == 404


def test_garbage_collection_of_a_replicasets_pods(kubesim_factory: Callable[..., SimHandle]) -> None:
    kube = client_for(kubesim_factory("small"))
    selector = {"matchLabels": {"app": "solo"}}
    template = {
        "metadata": {"labels": {"app": "solo"}},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
    }
    rs = kube.apps.create_namespaced_replica_set(
        "default",
        {"metadata": {"name": "solo"}, "spec": {"replicas": 3, "selector": selector, "template": template}},
    )
    state = watch_until(
        kube.core.list_namespaced_pod, lambda s: len(s) == 3, namespace="default", label_selector="app=solo"
    )
    assert all(p.metadata.owner_references[0].uid == rs.metadata.uid for p in state.values())
    kube.apps.delete_namespaced_replica_set("solo", "default")
    watch_until(
        kube.core.list_namespaced_pod, lambda s: not s, namespace="default", label_selector="app=solo"
    )
    # Orphan propagation keeps the dependents and removes their owner reference.
    [deploy] = kube.apps.list_namespaced_deployment("default").items
    kube.apps.delete_namespaced_deployment(deploy.metadata.name, "default", propagation_policy="Orphan")
    [orphan] = kube.apps.list_namespaced_replica_set("default").items
    assert not orphan.metadata.owner_references
    assert len(kube.core.list_namespaced_pod("default", label_selector="app=web").items) == 3


# ---------------------------------------------------------------------------------------------------------
# Subresources


def test_eviction_201_429_404(kubesim_factory: Callable[..., SimHandle]) -> None:
    kube = client_for(kubesim_factory("small"))  # web: 3 replicas, PDB minAvailable 2
    watch_until(
        kube.policy.list_namespaced_pod_disruption_budget,
        lambda s: s and s["default/web"].status.disruptions_allowed == 1,
        namespace="default",
    )
    pods = sorted(
        p.metadata.name for p in kube.core.list_namespaced_pod("default", label_selector="app=web").items
    )

    def evict(name: str) -> Any:
        return kube.core.create_namespaced_pod_eviction(
            name,
            "default",
            {
                "apiVersion": "policy/v1",
                "kind": "Eviction",
                "metadata": {"name": name, "namespace": "default"},
            },
        )

    evict(pods[0])  # 201
    evicted = kube.core.read_namespaced_pod(pods[0], "default")
    assert evicted.metadata.deletion_timestamp is not None
    # Marked first, as the real eviction handler does, so whoever watches knows an eviction ended it.
    marks = [
        (c.status, c.reason, c.message) for c in evicted.status.conditions if c.type == "DisruptionTarget"
    ]
    assert marks == [("True", "EvictionByEvictionAPI", "Eviction API: evicting")]
    refused = error_of(lambda: evict(pods[1]))
    assert refused.status == 429
    body = refusal(refused)
    assert body["reason"] == "TooManyRequests"
    assert body["details"]["causes"][0]["reason"] == "DisruptionBudget"
    assert "The disruption budget web needs 2 healthy pods" in body["details"]["causes"][0]["message"]
    assert error_of(lambda: evict("no-such-pod")).status == 404
    kept = kube.core.read_namespaced_pod(pods[1], "default").status.conditions
    assert not [c for c in kept if c.type == "DisruptionTarget"]  # refused: not marked
    # Once the replacement is Ready the budget allows one more.
    watch_until(
        kube.policy.list_namespaced_pod_disruption_budget,
        lambda s: s["default/web"].status.disruptions_allowed == 1,
        namespace="default",
    )
    evict(pods[1])


def test_request_evict_only_eviction_in_background(kubesim_factory: Callable[..., SimHandle]) -> None:
    handle = kubesim_factory(evict_in_background=True, evacuation_delay=0.3)
    kube = client_for(handle)
    kube.core.create_node(node_body("n1"))
    annotations = {"descheduler.alpha.kubernetes.io/request-evict-only": ""}
    vm = pod_body("vm", node="n1", annotations=annotations)
    # A finalizer holds the pod once the evacuator deletes it, so the second eviction meets it however
    # slowly this machine runs.
    vm["metadata"]["finalizers"] = ["example.com/hold"]
    kube.core.create_namespaced_pod("default", vm)
    eviction = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "vm", "namespace": "default"},
    }
    # As in a real cluster: KubeVirt's webhook denies with 429, and the API server wraps its message.
    denied = 'admission webhook "virt-launcher-eviction-interceptor.kubevirt.io" denied the request: '
    triggered = 'Eviction triggered evacuation of VMI "default/vm"'
    for again, expected in ((False, triggered), (True, f"Evacuation in progress: {triggered}")):
        refused = error_of(lambda: kube.core.create_namespaced_pod_eviction("vm", "default", eviction))
        status = refusal(refused)
        assert refused.status == 429 and status["code"] == 429 and "reason" not in status, (again, status)
        assert status["message"] == denied + expected, status
    pod = kube.core.read_namespaced_pod("vm", "default")
    assert "descheduler.alpha.kubernetes.io/eviction-in-progress" in pod.metadata.annotations
    watch_until(
        kube.core.list_namespaced_pod,
        lambda s: s["default/vm"].metadata.deletion_timestamp is not None,
        namespace="default",
    )
    kube.core.patch_namespaced_pod("vm", "default", {"metadata": {"finalizers": None}})
    watch_until(kube.core.list_namespaced_pod, lambda s: "default/vm" not in s, namespace="default")


def test_binding(kube: Kube) -> None:
    kube.core.create_namespaced_pod("default", pod_body("p", scheduler="manual"))
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p"},
        "target": {"kind": "Node", "name": "n9"},
    }
    status, _ = raw_request(kube, "POST", "/api/v1/namespaces/default/pods/p/binding", binding)
    assert status == 201
    assert kube.core.read_namespaced_pod("p", "default").spec.node_name == "n9"
    status, body = raw_request(kube, "POST", "/api/v1/namespaces/default/pods/p/binding", binding)
    assert status == 409 and body["reason"] == "Conflict"


def test_concurrent_clients_see_one_resource_version_sequence(kube: Kube) -> None:
    versions: list[int] = []
    lock = threading.Lock()

    def worker(i: int) -> None:
        client = client_for(kube.handle)
        for j in range(10):
            created = client.core.create_namespaced_config_map("default", {"metadata": {"name": f"c{i}-{j}"}})
            with lock:
                versions.append(int(created.metadata.resource_version))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(versions) == len(set(versions)) == 40


def test_discovery(kube: Kube) -> None:
    resources = kubernetes.client.CoreV1Api(kube.api).get_api_resources()
    names = {r.name for r in resources.resources}
    assert {"pods", "pods/eviction", "pods/binding", "pods/status", "nodes", "namespaces", "events"} <= names
    groups = {g.name for g in kubernetes.client.ApisApi(kube.api).get_api_versions().groups}
    assert {"apps", "policy", "coordination.k8s.io", "apiextensions.k8s.io", GROUP} <= groups
    eviction = next(r for r in resources.resources if r.name == "pods/eviction")
    assert (eviction.group, eviction.version, eviction.kind) == ("policy", "v1", "Eviction")


def test_later_pages_show_the_first_pages_snapshot(kube: Kube) -> None:
    for name in ("a", "b", "c", "d"):
        kube.core.create_namespaced_pod("default", pod_body(name, scheduler="manual"))
    first = kube.core.list_namespaced_pod("default", limit=2)
    assert [p.metadata.name for p in first.items] == ["a", "b"]
    kube.core.create_namespaced_pod("default", pod_body("bb", scheduler="manual"))  # after the snapshot
    kube.core.delete_namespaced_pod("c", "default")  # gone since, but in the snapshot
    kube.core.patch_namespaced_pod("d", "default", {"metadata": {"labels": {"later": "yes"}}})
    rest = kube.core.list_namespaced_pod("default", limit=5, _continue=first.metadata._continue)
    assert [p.metadata.name for p in rest.items] == ["c", "d"]
    assert rest.metadata.resource_version == first.metadata.resource_version
    assert "later" not in (rest.items[1].metadata.labels or {})  # d as it was then
    assert rest.metadata._continue is None
    now = [p.metadata.name for p in kube.core.list_namespaced_pod("default").items]
    assert now == ["a", "b", "bb", "d"]


def test_a_continue_token_past_compaction_gets_410_and_a_token_for_the_rest(kube: Kube) -> None:
    for name in ("a", "b", "c"):
        kube.core.create_namespaced_pod("default", pod_body(name, scheduler="manual"))
    first = kube.core.list_namespaced_pod("default", limit=1)
    kube.core.delete_namespaced_pod("b", "default")
    kube.handle.call(lambda sim: sim.store.compact())
    status, body = raw_request(
        kube, "GET", "/api/v1/namespaces/default/pods", query=f"?limit=1&continue={first.metadata._continue}"
    )
    assert (status, body["reason"]) == (410, "Expired")
    assert body["message"].startswith(
        "The provided continue parameter is too old to display a consistent list result. You can start a new"
        " list without the continue parameter, or use the continue token in this response"
    )
    rest = kube.core.list_namespaced_pod("default", _continue=body["metadata"]["continue"])
    assert [p.metadata.name for p in rest.items] == ["c"]  # the latest state after "a": b is gone


UPDATABLE = (
    "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,"
    "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),"
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
)


@pytest.mark.parametrize(
    "patch",
    [
        {"spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": "3"}}}]}},
        {"spec": {"nodeName": "n2"}},
        {"spec": {"restartPolicy": "Never"}},
    ],
    ids=["resources", "node-name", "restart-policy"],
)
def test_a_pods_spec_is_fixed_but_for_what_the_api_server_lets_change(
    kube: Kube, patch: dict[str, Any]
) -> None:
    kube.core.create_node(node_body("n1"))
    kube.core.create_node(node_body("n2"))
    kube.core.create_namespaced_pod("default", pod_body("p", cpu="1", node="n1"))
    refused = error_of(lambda: kube.core.patch_namespaced_pod("p", "default", patch))
    status = refusal(refused)
    assert (refused.status, status["reason"]) == (422, "Invalid")
    assert status["message"].startswith(f'Pod "p" is invalid: spec: Forbidden: {UPDATABLE}\n')
    assert status["details"]["causes"][0]["reason"] == "FieldValueForbidden"
    pod = kube.core.read_namespaced_pod("p", "default")
    assert (pod.spec.node_name, pod.spec.containers[0].resources.requests["cpu"]) == ("n1", "1")
    # What may change does: the image, more tolerations (added after the two the API server gave it: the
    # list has no merge key, so a patch naming only the new one would drop those, which is refused), labels.
    toleration = {"key": "k", "operator": "Exists", "effect": "NoSchedule"}
    kube.core.patch_namespaced_pod(
        "p",
        "default",
        {"metadata": {"labels": {"x": "y"}}, "spec": {"containers": [{"name": "main", "image": "pause:2"}]}},
    )
    kube.core.patch_namespaced_pod(
        "p", "default", [{"op": "add", "path": "/spec/tolerations/-", "value": toleration}]
    )
    pod = kube.core.read_namespaced_pod("p", "default")
    assert (pod.spec.containers[0].image, pod.metadata.labels["x"], len(pod.spec.tolerations)) == (
        "pause:2",
        "y",
        3,
    )
