"""`reservationOptions.template` read as Koordinator's `CreateOrUpdateReservationOptions` reads it: a
ReservationTemplateSpec whose metadata is the Reservation's and whose spec is a ReservationSpec, filled from
the pod where it leaves something out."""

from __future__ import annotations

from typing import Any

from services.executor.reservations import reservation_for
from shared.api.meta import ObjectMeta, ObjectReference
from shared.api.pmj import (
    PodMigrateReservationOptions,
    PodMigrationJob,
    PodMigrationJobSpec,
    ReservationTemplateSpec,
)
from shared.api.pod import pod_from

POD: dict[str, Any] = {
    "metadata": {
        "name": "web-0",
        "namespace": "default",
        "uid": "pod-uid",
        "labels": {"app": "web"},
        "annotations": {"note": "of the pod"},
        "ownerReferences": [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": "web-rs",
                "uid": "rs-1",
                "controller": True,
            }
        ],
    },
    "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "nginx"}]},
    "status": {"phase": "Running"},
}
ZONE_A = {"key": "zone", "operator": "In", "values": ["a"]}
EXCLUDE_NODE_1 = {"key": "metadata.name", "operator": "NotIn", "values": ["node-1"]}


def job(template: dict[str, Any] | None, ttl: str | None = "10m") -> PodMigrationJob:
    options = None
    if template is not None:
        options = PodMigrateReservationOptions(template=ReservationTemplateSpec(**template))
    return PodMigrationJob(
        metadata=ObjectMeta(name="move-web-0", uid="job-uid"),
        spec=PodMigrationJobSpec(
            pod_ref=ObjectReference(namespace="default", name="web-0"), ttl=ttl, reservation_options=options
        ),
    )


def test_a_template_spec_is_the_reservations_spec_and_its_metadata_the_reservations() -> None:
    pod_template: dict[str, Any] = {
        "metadata": {"labels": {"app": "web", "tier": "reserved"}},
        "spec": {
            "nodeName": "node-9",  # cleared: the replacement must be scheduled anew
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}],
            "tolerations": [{"key": "dedicated", "operator": "Exists"}],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [ZONE_A]}]
                    }
                }
            },
        },
    }
    owners = [{"object": {"kind": "Pod", "namespace": "default", "name": "web-0"}}]
    template = {
        "metadata": {"labels": {"team": "payments"}, "annotations": {"why": "defragmenting"}},
        "spec": {
            "template": pod_template,
            "owners": owners,
            "taints": [{"key": "reserved", "effect": "NoSchedule"}],
            "allocateOnce": False,  # forced true: a migration's room is used once
            "ttl": "3m",
        },
    }
    body = reservation_for(job(template), pod_from(POD), "5m", attempt=2)
    spec, meta = body["spec"], body["metadata"]
    assert meta["name"] == "move-web-0-2"  # Podherd's own name per attempt
    assert meta["labels"]["team"] == "payments" and meta["labels"]["podherd.io/job"] == "move-web-0"
    assert meta["annotations"] == {"why": "defragmenting"}
    assert spec["owners"] == owners and spec["taints"] == [{"key": "reserved", "effect": "NoSchedule"}]
    assert spec["allocateOnce"] is True and spec["ttl"] == "3m"
    made = spec["template"]
    assert made["metadata"] == {"labels": {"app": "web", "tier": "reserved"}}  # the template's, not the pod's
    assert "nodeName" not in made["spec"]
    assert made["spec"]["tolerations"] == pod_template["spec"]["tolerations"]
    [term] = made["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert term["matchExpressions"] == [ZONE_A]  # the template's own term, kept ...
    assert term["matchFields"] == [EXCLUDE_NODE_1]  # ... and the pod's node excluded in it


def test_no_reservation_order_is_stamped_but_a_templates_own_is_kept() -> None:
    """Koordinator stamps the creation time; koord-scheduler v1.8.0 then sends a replacement to the node of
    a sibling's Reservation already taken, outside any room (docs/reference/koordinator-compatibility.md)."""
    ordered = {"metadata": {"labels": {"scheduling.koordinator.sh/reservation-order": "1"}}}
    body = reservation_for(job(ordered), pod_from(POD), "5m")
    assert body["metadata"]["labels"]["scheduling.koordinator.sh/reservation-order"] == "1"
    unordered = reservation_for(job(None), pod_from(POD), "5m")["metadata"]["labels"]
    assert "scheduling.koordinator.sh/reservation-order" not in unordered


def test_what_the_template_leaves_out_is_the_pods() -> None:
    body = reservation_for(job({"spec": {"expires": "2030-01-01T00:00:00Z"}}), pod_from(POD), "5m")
    spec = body["spec"]
    assert spec["template"]["metadata"] == {
        "namespace": "default",
        "labels": {"app": "web"},
        "annotations": {"note": "of the pod"},
    }
    assert spec["template"]["spec"]["containers"] == POD["spec"]["containers"]
    assert spec["owners"][0]["controller"]["uid"] == "rs-1"
    assert spec["expires"] == "2030-01-01T00:00:00Z" and "ttl" not in spec  # expires set: no ttl added
    assert reservation_for(job(None), pod_from(POD), "5m")["spec"]["ttl"] == "10m"  # the job's
    assert reservation_for(job(None, ttl=None), pod_from(POD), "5m")["spec"]["ttl"] == "5m"  # the default
    assert "ttl" not in reservation_for(job(None, ttl="0s"), pod_from(POD), "5m")["spec"]  # no ttl: none


def plain(ttl: str | None = None, **annotations: str) -> PodMigrationJob:
    """A job without reservationOptions."""
    return PodMigrationJob(
        metadata=ObjectMeta(name="j", uid="j-uid", annotations=annotations),
        spec=PodMigrationJobSpec(pod_ref=ObjectReference(namespace="default", name="web-0"), ttl=ttl),
    )


def test_the_reservation_is_built_as_koordinator_builds_it() -> None:
    body = reservation_for(plain(ttl="10m"), pod_from(POD), "5m")
    spec = body["spec"]
    assert body["metadata"]["name"] == "j" and body["metadata"]["labels"]["podherd.io/job"] == "j"
    assert spec["allocateOnce"] is True and spec["ttl"] == "10m"
    assert spec["owners"] == [
        {"controller": {**POD["metadata"]["ownerReferences"][0], "namespace": "default"}}
    ]
    template = spec["template"]
    assert "nodeName" not in template["spec"] and template["metadata"]["labels"] == {"app": "web"}
    [term] = template["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert term["matchFields"] == [EXCLUDE_NODE_1]
    pinned = reservation_for(plain(**{"podherd.io/target-node": "node-7"}), pod_from(POD), "5m")
    assert pinned["spec"]["template"]["spec"]["nodeName"] == "node-7"
    assert "affinity" not in pinned["spec"]["template"]["spec"]
    pending = {**POD, "spec": {"containers": []}, "status": {"phase": "Pending"}}
    assert (
        reservation_for(plain(), pod_from(pending), "5m")["spec"]["owners"][0]["object"]["uid"] == "pod-uid"
    )
