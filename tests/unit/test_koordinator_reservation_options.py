"""Koordinator v1.8.0's TestCreateOrUpdateReservationOptions (migration/reservation/util_test.go), case by
case, on `reservation_for`: the Reservation keeps the pod's owner as its controller owner, is allocated once,
skips the pod's current node (a `metadata.name NotIn` field requirement added to each of its node selector
terms) and is labelled `app.kubernetes.io/created-by`; the pod's volumes are kept (Koordinator's
DisablePVCReservation feature gate is off by default). Where Podherd differs on purpose, the test says so:
its name (the job's attempt), its value of `created-by` (`podherd`), no `reservation-order` label, and the
pod template's metadata (namespace, labels and annotations, not the pod's owner references)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from services.executor.reservations import APP_CREATED_BY, reservation_for
from shared.api.pmj import PodMigrationJob
from shared.api.pod import pod_from

OWNER = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "test", "uid": "u", "controller": True}
EXCLUDE = {"key": "metadata.name", "operator": "NotIn", "values": ["test-node"]}
EXISTING = {"key": "test", "operator": "In", "values": ["xxxx"]}
CLAIM = {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}


def pod(**spec: Any) -> dict[str, Any]:
    meta = {"name": "p", "namespace": "default", "uid": "pu", "ownerReferences": [OWNER]}
    return {"metadata": meta, "spec": {"nodeName": "test-node", **spec}}


def affinity(*expressions: dict[str, Any]) -> dict[str, Any]:
    term = {"matchExpressions": list(expressions)} if expressions else {}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


@pytest.mark.parametrize(
    ("spec", "terms", "volumes"),
    [
        pytest.param({}, [{"matchFields": [EXCLUDE]}], None, id="skip current node"),
        pytest.param(
            {"affinity": affinity(EXISTING)},
            [{"matchExpressions": [EXISTING], "matchFields": [EXCLUDE]}],
            None,
            id="skip current node with existing node affinity",
        ),
        pytest.param(
            {"affinity": affinity(EXISTING), "volumes": [CLAIM]},
            [{"matchExpressions": [EXISTING], "matchFields": [EXCLUDE]}],
            [CLAIM],
            id="skip current node with existing node affinity, enable pvc reservation",
        ),
    ],
)
def test_create_or_update_reservation_options(
    spec: dict[str, Any], terms: list[dict[str, Any]], volumes: list[dict[str, Any]] | None
) -> None:
    case = str(spec)
    job = msgspec.convert(
        {"metadata": {"name": "j", "uid": "ju"}, "spec": {"podRef": {"name": "p"}}}, PodMigrationJob
    )
    made = reservation_for(job, pod_from(pod(**spec)), "5m")
    reserved = made["spec"]
    assert reserved["allocateOnce"] is True, case
    assert reserved["owners"] == [{"controller": {**OWNER, "namespace": "default"}}], case
    template = reserved["template"]
    assert "nodeName" not in template["spec"], case
    node_affinity = template["spec"]["affinity"]["nodeAffinity"]
    assert node_affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == terms, case
    assert template["spec"].get("volumes") == volumes, case
    assert template["metadata"]["namespace"] == "default", case
    assert made["metadata"]["labels"][APP_CREATED_BY] == "podherd", case  # Koordinator's: koord-descheduler
    assert "scheduling.koordinator.sh/reservation-order" not in made["metadata"]["labels"], case


def test_a_templates_whole_metadata_is_kept_but_what_the_api_server_writes() -> None:
    template = {
        "metadata": {
            "name": "mine",
            "labels": {"team": "a"},
            "annotations": {"note": "x"},
            "finalizers": ["example.com/keep"],
            "resourceVersion": "7",
            "uid": "u",
        }
    }
    job = msgspec.convert(
        {
            "metadata": {"name": "j"},
            "spec": {"podRef": {"name": "p"}, "reservationOptions": {"template": template}},
        },
        PodMigrationJob,
    )
    meta = reservation_for(job, pod_from(pod()), "5m")["metadata"]
    assert meta["finalizers"] == ["example.com/keep"] and meta["annotations"] == {"note": "x"}
    assert meta["labels"]["team"] == "a" and "resourceVersion" not in meta and "uid" not in meta
    assert meta["name"] == "j"  # the attempt's name: Podherd's, where Koordinator keeps the template's
