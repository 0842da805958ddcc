"""What pins a pod on a real cluster: a PersistentVolumeClaim whose volume lives in one zone. Claims,
volumes and classes as the API server takes them; binding and provisioning as kube-controller-manager does
them (a `WaitForFirstConsumer` claim only once its pod's node is chosen, in that node's zone); the
scheduler's VolumeBinding and VolumeZone filters, for pods and Reservations alike, in its own words."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import kubernetes
import pytest

from kubesim.sim import SimHandle
from tests.kube import Kube, client_for, refusal, watch_until, with_crds
from tests.kubesim.test_api import error_of
from tests.kubesim.test_kubectl import KUBECTL, kubectl
from tests.kubesim.test_loops import GROUP, VERSION, reservation, wait_reservation

pytestmark = pytest.mark.integration

ZONE = "topology.kubernetes.io/zone"
ZONAL = "zonal"  # a WaitForFirstConsumer class whose provisioner makes volumes confined to a zone


def two_zones(nodes_per_zone: int = 2, cpu: str = "4") -> dict[str, Any]:
    return {
        "name": "zones",
        "nodes": [
            {"name": f"{zone}-{{i}}", "count": nodes_per_zone, "capacity": {"cpu": cpu, "memory": "16Gi"},
             "labels": {ZONE: zone}}
            for zone in ("a", "b")
        ],
    }  # fmt: skip


@pytest.fixture
def zones(kubesim_factory: Callable[..., SimHandle]) -> Kube:
    kube = client_for(kubesim_factory(two_zones()))
    zonal_class(kube)
    return kube


def zonal_class(kube: Kube) -> None:
    storage(kube).create_storage_class(
        {
            "metadata": {"name": ZONAL},
            "provisioner": "disk.csi.example.com",
            "volumeBindingMode": "WaitForFirstConsumer",
        }
    )


def storage(kube: Kube) -> Any:
    return kubernetes.client.StorageV1Api(kube.api)


def claim_body(name: str, storage_class: str | None = ZONAL, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}, **spec},
    }
    if storage_class is not None:
        body["spec"]["storageClassName"] = storage_class
    return body


def pod_body(name: str, claim: str, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}],
            **spec,
        },
    }


def state_of(list_fn: Callable[..., Any], name: str, predicate: Callable[[Any], object]) -> Any:
    """The object `name` of `default`, once `predicate` holds of it."""
    key = f"default/{name}"
    return watch_until(list_fn, lambda s: key in s and predicate(s[key]), namespace="default")[key]


def claim_state(kube: Kube, name: str, predicate: Callable[[Any], object]) -> Any:
    return state_of(kube.core.list_namespaced_persistent_volume_claim, name, predicate)


def pod_state(kube: Kube, name: str, predicate: Callable[[Any], object]) -> Any:
    return state_of(kube.core.list_namespaced_pod, name, predicate)


def unschedulable(pod: Any) -> str | None:
    for condition in pod.status.conditions or []:
        if condition.type == "PodScheduled" and condition.reason == "Unschedulable":
            return str(condition.message)
    return None


def node_zone(kube: Kube, node: str) -> str:
    return str(kube.core.read_node(node).metadata.labels[ZONE])


def test_a_claim_waits_for_its_first_pod_then_pins_every_later_pod_to_the_zone_of_its_volume(
    zones: Kube,
) -> None:
    kube = zones
    kube.core.create_namespaced_persistent_volume_claim("default", claim_body("data"))
    events = watch_until(
        kube.core.list_namespaced_event,
        lambda s: any(e.reason == "WaitForFirstConsumer" for e in s.values()),
        namespace="default",
    )
    assert [e.message for e in events.values() if e.reason == "WaitForFirstConsumer"] == [
        "waiting for first consumer to be created before binding"
    ]
    assert kube.core.read_namespaced_persistent_volume_claim("data", "default").status.phase == "Pending"

    kube.core.create_namespaced_pod("default", pod_body("first", "data", nodeSelector={ZONE: "b"}))
    first = pod_state(kube, "first", lambda p: p.spec.node_name)
    claim = claim_state(kube, "data", lambda c: c.status.phase == "Bound")
    volume = kube.core.read_persistent_volume(claim.spec.volume_name)
    assert volume.metadata.name == f"pvc-{claim.metadata.uid}"
    assert (volume.status.phase, volume.spec.claim_ref.name, volume.spec.storage_class_name) == (
        "Bound", "data", ZONAL,
    )  # fmt: skip
    assert volume.spec.persistent_volume_reclaim_policy == "Delete"  # the class's
    term = volume.spec.node_affinity.required.node_selector_terms[0].match_expressions[0]
    assert (term.key, term.operator, term.values) == (ZONE, "In", ["b"])
    assert claim.status.capacity == {"storage": "1Gi"}
    assert claim.metadata.annotations["pv.kubernetes.io/bind-completed"] == "yes"
    assert claim.metadata.finalizers == ["kubernetes.io/pvc-protection"]
    assert node_zone(kube, first.spec.node_name) == "b"

    kube.core.create_namespaced_pod("default", pod_body("elsewhere", "data", nodeSelector={ZONE: "a"}))
    refused = pod_state(kube, "elsewhere", unschedulable)
    assert unschedulable(refused) == (
        "0/4 nodes are available: 2 node(s) didn't match Pod's node affinity/selector, "
        "2 node(s) had volume node affinity conflict."
    )
    kube.core.create_namespaced_pod("default", pod_body("anywhere", "data"))
    anywhere = pod_state(kube, "anywhere", lambda p: p.spec.node_name)
    assert node_zone(kube, anywhere.spec.node_name) == "b"

    # The claim is protected while a pod uses it; the volume (Delete) goes with it.
    kube.core.delete_namespaced_persistent_volume_claim("data", "default")
    assert kube.core.read_namespaced_persistent_volume_claim("data", "default").metadata.deletion_timestamp
    for name in ("first", "elsewhere", "anywhere"):
        kube.core.delete_namespaced_pod(name, "default", grace_period_seconds=0)
    watch_until(kube.core.list_persistent_volume, lambda s: not s)
    assert kube.core.list_namespaced_persistent_volume_claim("default").items == []


def test_the_api_server_and_the_scheduler_refuse_claims_in_their_own_words(zones: Kube) -> None:
    kube = zones
    bad = claim_body("bad")
    del bad["spec"]["accessModes"]
    del bad["spec"]["resources"]
    status = refusal(error_of(lambda: kube.core.create_namespaced_persistent_volume_claim("default", bad)))
    assert status["message"] == (
        'PersistentVolumeClaim "bad" is invalid: [spec.accessModes: Required value: at least 1 access mode '
        "is required, spec.resources[storage]: Required value]"
    )
    kube.core.create_namespaced_pod("default", pod_body("no-claim", "nope"))
    assert unschedulable(pod_state(kube, "no-claim", unschedulable)) == (
        '0/4 nodes are available: persistentvolumeclaim "nope" not found.'
    )
    # A claim of an Immediate class that cannot be provisioned waits, and so does its pod.
    kube.core.create_namespaced_persistent_volume_claim("default", claim_body("unbound", "gone"))
    kube.core.create_namespaced_pod("default", pod_body("waits", "unbound"))
    assert unschedulable(pod_state(kube, "waits", unschedulable)) == (
        "0/4 nodes are available: pod has unbound immediate PersistentVolumeClaims."
    )
    events = watch_until(
        kube.core.list_namespaced_event,
        lambda s: any(e.reason == "ProvisioningFailed" for e in s.values()),
        namespace="default",
    )
    assert {e.message for e in events.values() if e.reason == "ProvisioningFailed"} == {
        'storageclass.storage.k8s.io "gone" not found'
    }
    # A claim naming no class gets the default one (DefaultStorageClass); an Immediate class binds at once.
    default = {"storageclass.kubernetes.io/is-default-class": "true"}
    storage(kube).create_storage_class(
        {"metadata": {"name": "standard", "annotations": default}, "provisioner": "disk.csi.example.com"}
    )
    kube.core.create_namespaced_persistent_volume_claim("default", claim_body("defaulted", None))
    defaulted = claim_state(kube, "defaulted", lambda c: c.status.phase == "Bound")
    assert defaulted.spec.storage_class_name == "standard"
    assert kube.core.read_persistent_volume(defaulted.spec.volume_name).spec.node_affinity is None
    claim = kube.core.read_namespaced_persistent_volume_claim("unbound", "default")
    claim.spec.access_modes = ["ReadWriteMany"]
    status = refusal(
        error_of(lambda: kube.core.replace_namespaced_persistent_volume_claim("unbound", "default", claim))
    )
    assert status["message"].startswith(
        'PersistentVolumeClaim "unbound" is invalid: spec: Forbidden: spec is'
    )


def test_a_static_volume_labelled_with_its_zone_binds_at_once_and_keeps_its_pods_there(zones: Kube) -> None:
    """A pre-made volume of no class, labelled with its zone (VolumeZone) and made default by nothing: an
    Immediate claim of no class binds to the smallest that fits."""
    kube = zones
    for name, size in (("big", "10Gi"), ("small", "2Gi"), ("tiny", "512Mi")):
        kube.core.create_persistent_volume(
            {
                "metadata": {"name": name, "labels": {ZONE: "a"}},
                "spec": {
                    "capacity": {"storage": size},
                    "accessModes": ["ReadWriteOnce"],
                    "csi": {"driver": "disk.csi.example.com", "volumeHandle": name},
                },
            }
        )
    watch_until(
        kube.core.list_persistent_volume, lambda s: all(v.status.phase == "Available" for v in s.values())
    )
    kube.core.create_namespaced_persistent_volume_claim("default", claim_body("static", ""))
    claim = claim_state(kube, "static", lambda c: c.status.phase == "Bound")
    assert claim.spec.volume_name == "small"
    assert kube.core.read_persistent_volume("small").spec.persistent_volume_reclaim_policy == "Retain"
    kube.core.create_namespaced_pod("default", pod_body("held", "static", nodeSelector={ZONE: "b"}))
    assert unschedulable(pod_state(kube, "held", unschedulable)) == (
        "0/4 nodes are available: 2 node(s) didn't match Pod's node affinity/selector, "
        "2 node(s) had no available volume zone."
    )
    kube.core.delete_namespaced_pod("held", "default", grace_period_seconds=0)
    kube.core.delete_namespaced_persistent_volume_claim("static", "default")
    released = watch_until(kube.core.list_persistent_volume, lambda s: s["/small"].status.phase == "Released")
    assert released["/small"].spec.claim_ref.name == "static"  # Retain: kept, for its data


def test_a_reservation_for_a_pod_with_a_zonal_claim_is_held_in_that_zone(
    kubesim_factory: Callable[..., SimHandle],
) -> None:
    """Zone a is roomier, but the claim's volume is in zone b: koord-scheduler filters the reservation's
    pod as it would the pod itself."""
    kube = with_crds(client_for(kubesim_factory(two_zones(nodes_per_zone=1))))
    zonal_class(kube)
    kube.core.create_namespaced_persistent_volume_claim("default", claim_body("data"))
    kube.core.create_namespaced_pod("default", pod_body("db", "data", nodeSelector={ZONE: "b"}))
    pod_state(kube, "db", lambda p: p.spec.node_name == "b-1")
    owner = {"object": {"kind": "Pod", "namespace": "default", "name": "db-2"}}
    body = reservation("room", "1", [owner])
    body["spec"]["template"]["spec"]["volumes"] = [
        {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}
    ]
    kube.custom.create_cluster_custom_object(GROUP, VERSION, "reservations", body)
    held = wait_reservation(kube, "room", {"Available", "Failed"})
    assert held["status"]["nodeName"] == "b-1"
    body = reservation("nowhere", "1", [owner], exclude="b-1")
    body["spec"]["template"]["spec"]["volumes"] = [
        {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}
    ]
    kube.custom.create_cluster_custom_object(GROUP, VERSION, "reservations", body)
    refused = watch_until(
        kube.custom.list_cluster_custom_object,
        lambda s: any(
            c.get("reason") == "Unschedulable" for c in s["/nowhere"].get("status", {}).get("conditions", [])
        ),
        group=GROUP,
        version=VERSION,
        plural="reservations",
    )["/nowhere"]
    messages = [c["message"] for c in refused["status"]["conditions"] if c.get("reason") == "Unschedulable"]
    assert messages == [
        "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) had volume node affinity conflict."
    ]


def test_a_statefulset_makes_each_pod_its_claims_and_keeps_them_when_the_pod_goes(
    kubesim_factory: Callable[..., SimHandle],
) -> None:
    handle = kubesim_factory(two_zones())
    kube = client_for(handle)
    zonal_class(kube)
    template = {"metadata": {"labels": {"app": "db"}}, "spec": pod_body("db", "unused")["spec"]}
    template["spec"]["volumes"] = []
    claim_template = {"metadata": {"name": "data"}, "spec": claim_body("data")["spec"]}
    kube.apps.create_namespaced_stateful_set(
        "default",
        {
            "metadata": {"name": "db"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "db"}},
                "template": template,
                "volumeClaimTemplates": [claim_template],
            },
        },
    )
    claims = watch_until(
        kube.core.list_namespaced_persistent_volume_claim,
        lambda s: len(s) == 2 and all(c.status.phase == "Bound" for c in s.values()),
        namespace="default",
    )
    assert sorted(claims) == ["default/data-db-0", "default/data-db-1"]
    assert claims["default/data-db-0"].metadata.labels == {"app": "db"}
    pod = pod_state(kube, "db-0", lambda p: p.spec.node_name)
    claimed = [
        (v.name, v.persistent_volume_claim.claim_name) for v in pod.spec.volumes if v.persistent_volume_claim
    ]
    assert claimed == [("data", "data-db-0")]
    zone = node_zone(kube, pod.spec.node_name)
    kube.core.delete_namespaced_pod("db-0", "default")
    again = pod_state(kube, "db-0", lambda p: p.metadata.uid != pod.metadata.uid and p.spec.node_name)
    assert node_zone(kube, again.spec.node_name) == zone
    assert kube.core.read_namespaced_persistent_volume_claim("data-db-0", "default").metadata.uid == (
        claims["default/data-db-0"].metadata.uid
    )
    if KUBECTL is not None:
        table = kubectl(handle, "get", "pvc", "data-db-0", "--no-headers").split()
        volume = claims["default/data-db-0"].spec.volume_name
        assert table[:6] == ["data-db-0", "Bound", volume, "1Gi", "RWO", ZONAL]
        assert kubectl(handle, "get", "sc", "--no-headers").split()[:4] == [
            ZONAL, "disk.csi.example.com", "Delete", "WaitForFirstConsumer",
        ]  # fmt: skip
