"""The API types decode, round-trip and reject exactly as the PodMigrationJob proposal and Koordinator define
them."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
import yaml

from shared.api import codec
from shared.api.codec import SchemaError
from shared.api.meta import ObjectReference, controller_of
from shared.api.names import ANNOTATION_OWN_ROOM, LABEL_CREATED_BY, LABEL_JOB
from shared.api.pmj import (
    PHASE_PENDING,
    REASON_INVALID_POD_REF,
    REASON_INVALID_SPEC,
    REASONS,
    PodMigrateReservationOptions,
    PodMigrationJob,
    new_pmj,
)
from shared.api.reservation import Reservation, made_for
from shared.api.validation import validate_pmj

# Koordinator's guide's examples, verbatim.
SEED_001_RESERVATION_FIRST = """
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: PodMigrationJob
metadata:
  name: migrationjob-demo
spec:
  mode: ReservationFirst
"""
SEED_001_EVICT_DIRECTLY = SEED_001_RESERVATION_FIRST.replace("ReservationFirst", "EvictDirectly")

# Every field of the PodMigrationJob proposal's spec and status, as a job looks after a successful migration.
SEED_000_FULL: dict[str, Any] = {
    "apiVersion": "scheduling.koordinator.sh/v1alpha1",
    "kind": "PodMigrationJob",
    "metadata": {
        "name": "migrate-web-0",
        "uid": "0b5c3c42-5d6c-4d7e-9a53-2f1b0c8f7e11",
        "resourceVersion": "1042",
        "creationTimestamp": "2026-11-01T10:00:00Z",
        "annotations": {"podherd.io/target-node": "node-2"},
    },
    "spec": {
        "paused": True,
        "ttl": "5m",
        "mode": "ReservationFirst",
        "podRef": {"apiVersion": "v1", "kind": "Pod", "namespace": "default", "name": "web-0", "uid": "u-1"},
        "reservationOptions": {
            "reservationRef": {"name": "podherd-migrate-web-0", "uid": "r-1"},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"template": {"spec": {"nodeName": "node-2"}}, "ttl": "10m"},
            },
            "preemptionOptions": {},
        },
        "deleteOptions": {
            "gracePeriodSeconds": 30,
            "propagationPolicy": "Background",
            "preconditions": {"uid": "u-1"},
        },
    },
    "status": {
        "phase": "Succeeded",
        "status": "Complete",
        "reason": "",
        "message": "the replacement pod default/web-7 is bound to the Reservation and Ready",
        "conditions": [
            {"type": "ReservationCreated", "status": "True", "lastTransitionTime": "2026-11-01T10:00:01Z"},
            {
                "type": "ReservationScheduled",
                "status": "True",
                "lastProbeTime": "2026-11-01T10:00:02Z",
                "lastTransitionTime": "2026-11-01T10:00:02Z",
                "reason": "Scheduled",
                "message": "node-2",
            },
            {"type": "Eviction", "status": "True", "reason": "EvictComplete"},
            {"type": "PodScheduled", "status": "True"},
            {"type": "PodBoundReservation", "status": "True"},
            {"type": "BoundPodReady", "status": "True"},
            {"type": "ReservationBound", "status": "True"},
            {"type": "Preemption", "status": "Unknown"},
        ],
        "nodeName": "node-2",
        "podRef": {"namespace": "default", "name": "web-7", "uid": "u-7"},
        "preemptedPodsRef": [{"namespace": "default", "name": "batch-1"}],
        "preemptedPodsReservation": [
            {
                "namespace": "default",
                "name": "r-batch-1",
                "nodeName": "node-3",
                "phase": "Available",
                "preemptedPodRef": {"namespace": "default", "name": "batch-1"},
                "podsRef": [{"namespace": "default", "name": "batch-1-new"}],
            }
        ],
    },
}

# Drop the one field (reason: "") that Go's omitempty would also drop, so equality is exact.
SEED_000_FULL["status"].pop("reason")


def _roundtrip(document: dict[str, object]) -> dict[str, object]:
    job = codec.convert(document, PodMigrationJob)
    return json.loads(codec.encode(job))  # type: ignore[no-any-return]


@pytest.mark.parametrize("text", [SEED_001_RESERVATION_FIRST, SEED_001_EVICT_DIRECTLY])
def test_seed_001_examples_roundtrip(text: str) -> None:
    document = yaml.safe_load(text)
    job = codec.convert(document, PodMigrationJob)
    assert job.metadata.name == "migrationjob-demo"
    assert job.spec.mode == document["spec"]["mode"]
    assert job.phase == PHASE_PENDING
    assert _roundtrip(document) == {**document}


def test_seed_000_full_job_roundtrips_exactly() -> None:
    assert _roundtrip(SEED_000_FULL) == SEED_000_FULL
    job = codec.decode(json.dumps(SEED_000_FULL), PodMigrationJob)
    assert job.status is not None and job.status.preempted_pods_reservations is not None
    assert job.status.preempted_pods_reservations[0].node_name == "node-3"


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (("spec", "mode"), "Teleport", "spec.mode"),
        (("spec", "paused"), "yes", "spec.paused"),
        (("spec", "ttl"), "5 minutes", "spec.ttl"),
        (("spec", "ttl"), 300, "spec.ttl"),
        (("spec", "podRef"), "default/web-0", "spec.podRef"),
        (("status", "phase"), "Succeed", "status.phase"),
        (("spec", "deleteOptions", "propagationPolicy"), "Sideways", "spec.deleteOptions.propagationPolicy"),
        (("spec", "deleteOptions", "gracePeriodSeconds"), -1, "spec.deleteOptions.gracePeriodSeconds"),
        (("kind",), "Reservation", "kind"),
    ],
)
def test_wrong_values_are_rejected_naming_the_field(path: tuple[str, ...], value: object, field: str) -> None:
    document = json.loads(json.dumps(SEED_000_FULL))
    node = document
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(SchemaError) as err:
        codec.decode(json.dumps(document), PodMigrationJob)
    assert err.value.field == field
    assert field in str(err.value)


def test_condition_type_must_be_known() -> None:
    document = json.loads(json.dumps(SEED_000_FULL))
    document["status"]["conditions"][0]["type"] = "Teleported"
    with pytest.raises(SchemaError) as err:
        codec.convert(document, PodMigrationJob)
    assert err.value.field == "status.conditions[0].type"


def test_missing_condition_status_is_named() -> None:
    document = json.loads(json.dumps(SEED_000_FULL))
    del document["status"]["conditions"][1]["status"]
    with pytest.raises(SchemaError) as err:
        codec.convert(document, PodMigrationJob)
    assert err.value.field == "status.conditions[1].status"


def test_not_json_is_a_schema_error() -> None:
    with pytest.raises(SchemaError, match="not valid JSON"):
        codec.decode(b"{spec:", PodMigrationJob)


def test_unknown_fields_from_the_server_are_ignored() -> None:
    document = json.loads(json.dumps(SEED_000_FULL))
    document["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    document["spec"]["futureField"] = 1
    assert codec.convert(document, PodMigrationJob).metadata.name == "migrate-web-0"


def test_seed_001_example_without_pod_ref_fails_as_invalid_pod_ref() -> None:
    job = codec.convert(yaml.safe_load(SEED_001_RESERVATION_FIRST), PodMigrationJob)
    invalid = validate_pmj(job)
    assert invalid is not None
    assert invalid.reason == REASON_INVALID_POD_REF
    assert "spec.podRef" in invalid.message


@pytest.mark.parametrize(
    ("ref", "spec", "reason", "needle"),
    [
        (
            ObjectReference(kind="Node", name="n", namespace="d"),
            {},
            REASON_INVALID_POD_REF,
            "kind must be Pod",
        ),
        (ObjectReference(namespace="default"), {}, REASON_INVALID_POD_REF, "name is required"),
        (ObjectReference(name="web-0"), {}, REASON_INVALID_POD_REF, "namespace is required"),
        (ObjectReference(name="web-0", namespace="d"), {"ttl": "-5m"}, REASON_INVALID_SPEC, "ttl"),
    ],
)
def test_invalid_specs(ref: ObjectReference, spec: dict[str, str], reason: str, needle: str) -> None:
    invalid = validate_pmj(new_pmj("j", ref, **spec))
    assert invalid is not None and invalid.reason == reason and needle in invalid.message


def test_new_pmj_is_ready_to_create() -> None:
    job = new_pmj("migrate-web-0", ObjectReference(namespace="default", name="web-0"), mode="EvictDirectly")
    assert validate_pmj(job) is None
    assert json.loads(codec.encode(job)) == {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "PodMigrationJob",
        "metadata": {"name": "migrate-web-0"},
        "spec": {"mode": "EvictDirectly", "podRef": {"namespace": "default", "name": "web-0"}},
    }


def test_reasons_include_koordinators_later_additions() -> None:
    assert {"ReservationExpired", "ForbiddenMigratePod", "InvalidPodRef", "WaitForBoundPodReady"} <= REASONS


RESERVATION = {
    "apiVersion": "scheduling.koordinator.sh/v1alpha1",
    "kind": "Reservation",
    "metadata": {"name": "podherd-migrate-web-0", "labels": {"podherd.io/created-by": "podherd"}},
    "spec": {
        "template": {
            "metadata": {"namespace": "default"},
            "spec": {"containers": [{"name": "web", "resources": {"requests": {"cpu": "2"}}}]},
        },
        "owners": [
            {
                "controller": {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "web-5d",
                    "uid": "rs-1",
                    "controller": True,
                    "namespace": "default",
                }
            },
            {"object": {"namespace": "default", "name": "web-0"}},
            {"labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]}},
        ],
        "ttl": "5m",
        "allocateOnce": True,
    },
    "status": {
        "phase": "Available",
        "nodeName": "node-2",
        "conditions": [{"type": "Scheduled", "status": "True", "reason": "Scheduled"}],
        "currentOwners": [{"namespace": "default", "name": "web-7", "uid": "u-7"}],
        "allocatable": {"cpu": "2"},
        "allocated": {"cpu": "2"},
    },
}


def test_reservation_roundtrips() -> None:
    reservation = codec.convert(RESERVATION, Reservation)
    assert reservation.phase == "Available"
    assert reservation.allocate_once is True
    assert json.loads(codec.encode(reservation)) == RESERVATION


def test_reservation_allocate_once_defaults_true() -> None:
    assert Reservation().allocate_once is True


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda r: r["status"].__setitem__("phase", "Reserved"), "status.phase"),
        (
            lambda r: r["spec"]["owners"][2]["labelSelector"]["matchExpressions"][0].__setitem__(
                "operator", "Eq"
            ),
            "spec.owners[2].labelSelector.matchExpressions[0].operator",
        ),
        (lambda r: r["spec"].__setitem__("allocateOnce", "yes"), "spec.allocateOnce"),
    ],
)
def test_reservation_rejects(mutate: object, field: str) -> None:
    document = json.loads(json.dumps(RESERVATION))
    mutate(document)  # type: ignore[operator]
    with pytest.raises(SchemaError) as err:
        codec.convert(document, Reservation)
    assert err.value.field == field


def test_controller_of() -> None:
    job = codec.convert(
        {
            "metadata": {
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "A", "name": "a", "uid": "1"},
                    {
                        "apiVersion": "apps/v1",
                        "kind": "ReplicaSet",
                        "name": "rs",
                        "uid": "2",
                        "controller": True,
                    },
                ]
            }
        },
        PodMigrationJob,
    )
    ref = controller_of(job.metadata)
    assert ref is not None and ref.name == "rs"
    assert msgspec.structs.asdict(ref)["kind"] == "ReplicaSet"


@pytest.mark.parametrize("ref", ["move-1", "move-1-2", "operators-room"])
def test_a_reservation_ref_is_the_users_unless_podherd_wrote_it(ref: str) -> None:
    """Whose a Reservation is does not depend on its name: one named as Podherd names its own (`move-1`,
    `move-1-2`) is the user's when the user named it."""

    def job(**annotations: str) -> PodMigrationJob:
        options = PodMigrateReservationOptions(reservation_ref=ObjectReference(name=ref))
        made = new_pmj(
            "move-1", ObjectReference(namespace="default", name="web-0"), reservation_options=options
        )
        made.metadata.annotations = annotations
        return made

    assert job().spec.reservation_ref_name == ref
    assert job().user_reservation == ref
    assert job(**{ANNOTATION_OWN_ROOM: ref}).user_reservation is None  # Podherd pointed it at its own
    assert job(**{ANNOTATION_OWN_ROOM: "move-1-3"}).user_reservation == ref  # the user named another since


def test_podherds_own_reservations_are_known_by_their_labels() -> None:
    labels = {LABEL_CREATED_BY: "podherd", LABEL_JOB: "move-1"}
    assert made_for({"metadata": {"labels": labels}}, "move-1")
    assert not made_for({"metadata": {"labels": labels}}, "move-2")
    assert not made_for({"metadata": {"name": "move-1"}}, "move-1")  # named so by a user, not labelled
