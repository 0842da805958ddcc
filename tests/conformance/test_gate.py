"""The admission gate as deployed, called by the engine's own admission chain (kube-apiserver's webhooks on
the real engine): a PodMigrationJob that could not run is refused naming its field, and one whose author
may not evict its pod is refused."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from podherd.harness.gate import Gate
from services.gate.evacuation import OPT_IN
from shared.api.names import ANNOTATION_REQUESTER, ANNOTATION_TARGET_NODE
from tests.conformance.conftest import Scoped, gate_before
from tests.conformance.engines import cluster
from tests.e2e.pipeline import GROUP, VERSION
from tests.e2e.test_gate import account_kube, create_job, get_job
from tests.kube import refusal

pytestmark = [pytest.mark.e2e, pytest.mark.integration]
JOBS = "podmigrationjobs"


@pytest.fixture
def gated(
    engine_cluster: Callable[[dict[str, Any]], Scoped], tmp_path: Path, test_id: str
) -> Iterator[tuple[Scoped, Gate]]:
    """The test's cluster with pods `web` (opted in) in its namespace and `app` in `<scope>-x` and
    `<scope>-y`, and the gate before it."""
    document = cluster(web=0, nodes=1)
    document["namespaces"] = [f"{test_id}-x", f"{test_id}-y"]
    document["pods"] = [
        {"name": "web", "labels": {OPT_IN: "true"}},
        *({"name": "app", "namespace": f"{test_id}-{ns}"} for ns in "xy"),
    ]
    c = engine_cluster(document)
    with gate_before(c, tmp_path) as gate:
        yield c, gate


def invalid(pod: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    """One job per field that makes no sense, and the words its refusal names the field by. A value of the
    wrong JSON type is refused by the CRD's own schema, before any webhook; the rest by the gate."""
    return [
        ({}, "spec.podRef"),
        ({"podRef": "web"}, "spec.podRef"),
        ({"podRef": {**pod, "kind": "Node"}}, "spec.podRef.kind"),
        ({"podRef": {"namespace": "shop"}}, "spec.podRef.name"),
        ({"podRef": {"name": "web"}}, "spec.podRef.namespace"),
        ({"podRef": {**pod, "name": "Web_1"}}, "spec.podRef.name"),
        ({"podRef": {**pod, "namespace": "Shop"}}, "spec.podRef.namespace"),
        ({"podRef": pod, "mode": "Teleport"}, "spec.mode"),
        ({"podRef": pod, "ttl": "5 minutes"}, "spec.ttl"),
        ({"podRef": pod, "ttl": "-5m"}, "spec.ttl"),
        ({"podRef": pod, "ttl": 5}, "spec.ttl"),
        ({"podRef": pod, "paused": "yes"}, "spec.paused"),
        (
            {"podRef": pod, "deleteOptions": {"gracePeriodSeconds": "soon"}},
            "spec.deleteOptions.gracePeriodSeconds",
        ),
        (
            {"podRef": pod, "deleteOptions": {"propagationPolicy": "Later"}},
            "spec.deleteOptions.propagationPolicy",
        ),
        ({"podRef": pod, "deleteOptions": {"dryRun": ["Some"]}}, "spec.deleteOptions.dryRun"),
        (
            {"podRef": pod, "reservationOptions": {"reservationRef": {}}},
            "spec.reservationOptions.reservationRef.name",
        ),
        (
            {"podRef": pod, "reservationOptions": {"template": {"spec": {"template": "pod"}}}},
            "spec.reservationOptions.template.spec.template",
        ),
        (
            {"podRef": pod, "reservationOptions": {"template": {"spec": {"owners": {}}}}},
            "spec.reservationOptions.template.spec.owners",
        ),
        (
            {"podRef": pod, "reservationOptions": {"template": {"spec": {"ttl": "forever"}}}},
            "spec.reservationOptions.template.spec.ttl",
        ),
        (
            {"podRef": pod, "reservationOptions": {"template": {"spec": {"template": {"spec": []}}}}},
            "spec.reservationOptions.template.spec.template.spec",
        ),
    ]


def test_a_job_that_could_not_run_is_refused_naming_its_field_and_its_pod_never_changes(
    gated: tuple[Scoped, Gate],
) -> None:
    c, _ = gated
    kube, pod = c.kube, {"kind": "Pod", "namespace": c.namespace, "name": "web"}
    by_gate = 0
    for i, (spec, field) in enumerate(invalid(pod)):
        name = c.job_name(f"bad-{i}")
        code, message = create_job(kube, name, spec)
        assert code == 422 and field in message, (spec, message)
        gate = message.startswith('admission webhook "podmigrationjobs.gate.podherd.io" denied the request: ')
        by_gate += gate
        assert gate or f'PodMigrationJob.scheduling.koordinator.sh "{name}" is invalid: {field}' in message
    assert by_gate >= 15
    made = kube.custom.list_cluster_custom_object(GROUP, VERSION, JOBS)["items"]
    assert [j["metadata"]["name"] for j in made if j["metadata"]["name"].startswith(c.scope)] == []

    good = c.job_name("good")
    assert create_job(kube, good, {"podRef": pod}) == (201, "")
    status = {"status": {"phase": "Running", "message": "moving"}}  # Podherd's alone, not even an admin's
    with pytest.raises(kubernetes.client.ApiException) as written:
        kube.custom.patch_cluster_custom_object_status(GROUP, VERSION, JOBS, good, status)
    assert (
        written.value.status == 403
        and "written only by Podherd's services" in refusal(written.value)["message"]
    )
    kube.custom.patch_cluster_custom_object(  # so does anything but the spec
        GROUP, VERSION, JOBS, good, {"metadata": {"annotations": {"note": "x"}}}
    )
    for moved in ({"name": "other"}, {"namespace": "elsewhere"}):
        with pytest.raises(kubernetes.client.ApiException) as changed:
            kube.custom.patch_cluster_custom_object(GROUP, VERSION, JOBS, good, {"spec": {"podRef": moved}})
        assert changed.value.status == 422
        assert (
            f"spec.podRef cannot change after the job is made: it names {c.namespace}/web"
            in refusal(changed.value)["message"]
        )
    kube.custom.patch_cluster_custom_object(GROUP, VERSION, JOBS, good, {"spec": {"paused": True}})


def test_a_job_is_refused_to_an_author_who_may_not_evict_its_pod(
    gated: tuple[Scoped, Gate], tmp_path: Path
) -> None:
    c, _ = gated
    x, y = f"{c.scope}-x", f"{c.scope}-y"
    jobs = [{"apiGroups": [GROUP], "resources": [JOBS], "verbs": ["create", "patch", "get"]}]
    alice = account_kube(
        c.kube, tmp_path, "alice", jobs, evict_in=x, namespace=c.namespace, role=f"{x}-alice"
    )
    in_x, in_y = ({"podRef": {"kind": "Pod", "namespace": ns, "name": "app"}} for ns in (x, y))
    assert create_job(alice, c.job_name("alice-x"), in_x) == (201, "")
    who = f"system:serviceaccount:{c.namespace}:alice"
    made = get_job(c.kube, c.job_name("alice-x"))
    assert (
        made is not None and made["metadata"]["annotations"][ANNOTATION_REQUESTER] == who
    )  # the gate's word
    pin = {"metadata": {"annotations": {ANNOTATION_TARGET_NODE: f"{c.scope}-node-1"}}}
    with pytest.raises(kubernetes.client.ApiException) as pinned:  # choosing the node is the scheduler's
        alice.custom.patch_cluster_custom_object(GROUP, VERSION, JOBS, c.job_name("alice-x"), pin)
    assert pinned.value.status == 403 and "create pods/binding app" in refusal(pinned.value)["message"]
    code, message = create_job(alice, c.job_name("alice-y"), in_y)
    assert code == 403, message
    assert (
        f'user "{who}" may not create pods/eviction app in namespace {y}, and a job evicts its pod' in message
    )
    assert get_job(c.kube, c.job_name("alice-y")) is None
    with pytest.raises(kubernetes.client.ApiException) as moved:  # nor moved there after it was made
        alice.custom.patch_cluster_custom_object(GROUP, VERSION, JOBS, c.job_name("alice-x"), {"spec": in_y})
    assert moved.value.status == 422
    alice.custom.patch_cluster_custom_object(  # a change of hers to her own pod's job: asked again, allowed
        GROUP, VERSION, JOBS, c.job_name("alice-x"), {"spec": {"mode": "EvictDirectly"}}
    )
    assert create_job(c.kube, c.job_name("admin-y"), in_y) == (201, "")  # who may evict there may
