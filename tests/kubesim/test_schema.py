"""kubesim applies each CRD's schema to custom resources as kube-apiserver does: 422 `Invalid` with the field
errors apiextensions-apiserver words, unknown fields pruned as `fieldValidation` says, `default`s filled in,
and no unconditional update of a custom resource. Asserted with the official client and the real kubectl."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from kubesim.sim import SimHandle
from tests.kube import Kube, refusal
from tests.kubesim.test_kubectl import CRDS, KUBECTL, kubectl

pytestmark = pytest.mark.integration
GROUP, VERSION = "scheduling.koordinator.sh", "v1alpha1"
PMJS = f"/apis/{GROUP}/{VERSION}/podmigrationjobs"
RESERVATIONS = f"/apis/{GROUP}/{VERSION}/reservations"


def pmj(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PodMigrationJob",
        "metadata": {"name": name},
        "spec": {"podRef": {"namespace": "default", "name": "web-0"}, **spec},
    }


def reservation(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Reservation",
        "metadata": {"name": name},
        "spec": {
            "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}},
            "owners": [{"object": {"namespace": "default", "name": "web-0"}}],
            **spec,
        },
    }


def request(
    kube: Kube,
    method: str,
    path: str,
    body: Any = None,
    content_type: str = "application/json",
    *,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any, list[str]]:
    """(status, decoded body, Warning headers) of a request outside the typed client, as the administrator
    (with `headers` beside, e.g. whom to impersonate)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        kube.handle.url + path,
        data=data,
        method=method,
        headers={"Content-Type": content_type, **kube.handle.admin_headers, **(headers or {})},
    )
    try:
        with urllib.request.urlopen(req, timeout=10, context=kube.handle.ssl_context) as response:
            return response.status, json.loads(response.read()), response.headers.get_all("Warning") or []
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read()), err.headers.get_all("Warning") or []


def refused(call: Callable[[], object]) -> tuple[int, dict[str, Any]]:
    with pytest.raises(kubernetes.client.ApiException) as caught:
        call()
    return caught.value.status, refusal(caught.value)


def create(kube: Kube, plural: str, body: dict[str, Any]) -> Callable[[], object]:
    return lambda: kube.custom.create_cluster_custom_object(GROUP, VERSION, plural, body)


@pytest.mark.parametrize(
    ("plural", "body", "message", "cause"),
    [
        (
            "podmigrationjobs",
            pmj("paused", paused="yes"),
            'PodMigrationJob.scheduling.koordinator.sh "paused" is invalid: spec.paused: Invalid value:'
            ' "string": spec.paused in body must be of type boolean: "string"',
            {
                "reason": "FieldValueTypeInvalid",
                "message": 'Invalid value: "string": spec.paused in body must be of type boolean: "string"',
                "field": "spec.paused",
            },
        ),
        (
            "podmigrationjobs",
            pmj("ttl", ttl=5),
            'PodMigrationJob.scheduling.koordinator.sh "ttl" is invalid: spec.ttl: Invalid value: "integer":'
            ' spec.ttl in body must be of type string: "integer"',
            None,
        ),
        (
            "podmigrationjobs",
            {**pmj("no-pod"), "spec": {"mode": "ReservationFirst"}},  # the guide's example has no podRef
            'PodMigrationJob.scheduling.koordinator.sh "no-pod" is invalid: spec.podRef: Required value',
            {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.podRef"},
        ),
        (
            "reservations",
            reservation("greedy", allocatePolicy="Greedy"),
            'Reservation.scheduling.koordinator.sh "greedy" is invalid: spec.allocatePolicy: Unsupported'
            ' value: "Greedy": supported values: "Aligned", "Restricted"',
            {
                "reason": "FieldValueNotSupported",
                "message": 'Unsupported value: "Greedy": supported values: "Aligned", "Restricted"',
                "field": "spec.allocatePolicy",
            },
        ),
        (
            "reservations",
            reservation("ownerless", owners=[]),
            'Reservation.scheduling.koordinator.sh "ownerless" is invalid: spec.owners: Invalid value: 0:'
            " spec.owners in body should have at least 1 items",
            None,
        ),
        (
            "reservations",
            reservation("two", owners=[{}], expires="tomorrow"),
            'Reservation.scheduling.koordinator.sh "two" is invalid: [spec.expires: Invalid value:'
            ' "tomorrow": spec.expires in body must be of type date-time: "tomorrow", spec.owners[0]:'
            " Invalid value: 0: spec.owners[0] in body should have at least 1 properties]",
            None,
        ),
    ],
    ids=["wrong-type", "number-for-string", "required", "enum", "min-items", "two-errors"],
)
def test_a_body_against_the_schema_is_refused_422_in_the_api_servers_words(
    kube: Kube, plural: str, body: dict[str, Any], message: str, cause: dict[str, str] | None
) -> None:
    code, status = refused(create(kube, plural, body))
    assert (code, status["reason"], status["message"]) == (422, "Invalid", message)
    assert status["details"]["group"] == GROUP and status["details"]["name"] == body["metadata"]["name"]
    if cause is not None:
        assert status["details"]["causes"] == [cause]
    assert kube.custom.list_cluster_custom_object(GROUP, VERSION, plural)["items"] == []


def test_unknown_fields_are_pruned_with_a_warning_by_default(kube: Kube) -> None:
    body = pmj("pruned", targetNode="node-3")
    body["metadata"]["colour"] = "blue"
    code, created, warnings = request(kube, "POST", PMJS, body)
    assert code == 201
    assert warnings == [
        '299 - "unknown field \\"metadata.colour\\""',
        '299 - "unknown field \\"spec.targetNode\\""',
    ]
    stored = kube.custom.get_cluster_custom_object(GROUP, VERSION, "podmigrationjobs", "pruned")
    assert "targetNode" not in stored["spec"] and "colour" not in stored["metadata"]
    assert created["spec"] == stored["spec"]


def test_unknown_fields_follow_the_requests_field_validation(kube: Kube) -> None:
    code, status, _ = request(kube, "POST", PMJS + "?fieldValidation=Strict", pmj("strict", targetNode="n"))
    assert (code, status["reason"]) == (400, "BadRequest")
    assert status["message"] == (
        'PodMigrationJob in version "v1alpha1" cannot be handled as a PodMigrationJob:'
        ' strict decoding error: unknown field "spec.targetNode"'
    )
    code, _, warnings = request(kube, "POST", PMJS + "?fieldValidation=Ignore", pmj("ignore", targetNode="n"))
    assert (code, warnings) == (201, [])
    code, status, _ = request(kube, "POST", PMJS + "?fieldValidation=Loose", pmj("loose"))
    assert (code, status["message"]) == (
        422,
        'CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "Loose":'
        ' supported values: "Ignore", "Strict", "Warn"',
    )


def test_schema_defaults_are_filled_in_and_preserved_fields_kept(kube: Kube) -> None:
    body = reservation("defaults", preAllocationPolicy={})
    body["spec"]["template"]["metadata"] = {"labels": {"app": "web"}}
    created = kube.custom.create_cluster_custom_object(GROUP, VERSION, "reservations", body)
    spec = created["spec"]
    assert (spec["ttl"], spec["allocateOnce"]) == ("24h", True)
    assert spec["preAllocationPolicy"] == {"enableMultiple": False, "mode": "Default"}
    assert spec["template"]["metadata"] == {"labels": {"app": "web"}}  # schemaless: kept as sent
    without = kube.custom.create_cluster_custom_object(GROUP, VERSION, "reservations", reservation("bare"))
    assert "preAllocationPolicy" not in without["spec"]  # a default applies only where its parent is


def test_writes_to_the_status_and_patches_are_validated_too(kube: Kube) -> None:
    kube.custom.create_cluster_custom_object(GROUP, VERSION, "podmigrationjobs", pmj("s"))
    code, status = refused(
        lambda: kube.custom.patch_cluster_custom_object_status(
            GROUP, VERSION, "podmigrationjobs", "s", {"status": {"phase": 3}}
        )
    )
    assert (code, status["details"]["causes"][0]["field"]) == (422, "status.phase")
    code, status = refused(
        lambda: kube.custom.patch_cluster_custom_object(
            GROUP, VERSION, "podmigrationjobs", "s", {"spec": {"paused": "no"}}
        )
    )
    assert (code, status["details"]["causes"][0]["field"]) == (422, "spec.paused")
    kept = kube.custom.get_cluster_custom_object(GROUP, VERSION, "podmigrationjobs", "s")
    assert "paused" not in kept["spec"] and "phase" not in kept.get("status", {})


def test_a_custom_resource_is_never_updated_unconditionally(kube: Kube) -> None:
    kube.custom.create_cluster_custom_object(GROUP, VERSION, "podmigrationjobs", pmj("u"))
    code, status = refused(
        lambda: kube.custom.replace_cluster_custom_object(GROUP, VERSION, "podmigrationjobs", "u", pmj("u"))
    )
    assert (code, status["message"]) == (
        422,
        'PodMigrationJob.scheduling.koordinator.sh "u" is invalid: metadata.resourceVersion: Invalid value:'
        " 0x0: must be specified for an update",
    )


@pytest.mark.kubectl
@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH: install kubectl (v1.32)")
def test_kubectl_refuses_unknown_fields_strictly_and_shows_invalid_values(
    kubesim_factory: Callable[..., SimHandle], tmp_path: Path
) -> None:
    handle = kubesim_factory()
    kubectl(handle, "apply", "-k", str(CRDS))
    manifest = tmp_path / "job.yaml"
    manifest.write_text(
        "apiVersion: scheduling.koordinator.sh/v1alpha1\nkind: PodMigrationJob\nmetadata: {name: typo}\n"
        "spec: {podRef: {namespace: default, name: web-0}, targetNode: node-3}\n"
    )
    out = kubectl(handle, "create", "-f", str(manifest), check=False, stderr=True)
    assert 'strict decoding error: unknown field "spec.targetNode"' in out
    manifest.write_text(manifest.read_text().replace("targetNode: node-3", 'paused: "yes"'))
    out = kubectl(handle, "apply", "-f", str(manifest), check=False, stderr=True)
    assert 'The PodMigrationJob "typo" is invalid: spec.paused: Invalid value: "string"' in out
    assert "No resources found" in kubectl(handle, "get", "pmj", stderr=True)
