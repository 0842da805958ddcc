"""What the API server checks or changes in a request before it acts: an Eviction named other than its URL,
a dry run asked in the query, a Secret's stringData and type, the groups of an impersonated user."""

from __future__ import annotations

import base64
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest

from kubesim.sim import SimHandle
from tests.kube import Kube, client_for
from tests.kubesim.test_schema import request

pytestmark = [pytest.mark.integration]
PODS = "/api/v1/namespaces/default/pods"


@pytest.fixture
def kube(kubesim_factory: Callable[..., SimHandle]) -> Kube:
    kube = client_for(kubesim_factory("fragmented"))
    body = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    kube.core.create_namespaced_pod("default", body)
    return kube


def eviction(name: str, **more: Any) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}, **more}


def test_an_eviction_named_other_than_its_url_is_refused(kube: Kube) -> None:
    code, status, _ = request(kube, "POST", f"{PODS}/p/eviction", eviction("q"))
    assert (code, status["reason"], status["message"]) == (
        400,
        "BadRequest",
        "name in URL does not match name in Eviction object",
    )
    other = eviction("p", metadata={"name": "p", "namespace": "kube-system"})
    code, status, _ = request(kube, "POST", f"{PODS}/p/eviction", other)
    assert (code, status["message"]) == (
        400,
        "the namespace of the provided object does not match the namespace sent on the request",
    )
    assert kube.core.read_namespaced_pod("p", "default").metadata.deletion_timestamp is None


def test_a_dry_run_asked_in_the_query_evicts_nothing(kube: Kube) -> None:
    code, _, _ = request(kube, "POST", f"{PODS}/p/eviction?dryRun=All", eviction("p"))
    assert code == 201
    assert kube.core.read_namespaced_pod("p", "default").metadata.deletion_timestamp is None
    assert kube.handle.call(lambda sim: dict(sim.store.evictions)) == {}
    disagreeing = eviction("p", deleteOptions={"dryRun": ["Some"]})
    code, status, _ = request(kube, "POST", f"{PODS}/p/eviction?dryRun=All", disagreeing)
    assert (code, status["reason"], status["message"]) == (
        500,
        "Unknown",
        "Non-matching dry-run options in request and content: [All] and [Some]",
    )


def test_a_secrets_string_data_is_stored_as_data_and_its_type_defaulted(kube: Kube) -> None:
    body = {
        "metadata": {"name": "s"},
        "data": {"a": base64.b64encode(b"old").decode(), "b": base64.b64encode(b"kept").decode()},
        "stringData": {"a": "new", "c": "plain"},
    }
    code, made, _ = request(kube, "POST", "/api/v1/namespaces/default/secrets", body)
    assert code == 201 and "stringData" not in made
    assert made["type"] == "Opaque"
    assert {k: base64.b64decode(v).decode() for k, v in made["data"].items()} == {
        "a": "new",
        "b": "kept",
        "c": "plain",
    }


def test_an_impersonated_user_named_without_groups_is_authenticated(kube: Kube) -> None:
    rbac = kube.client("RbacAuthorizationV1Api")
    rule = {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}
    rbac.create_cluster_role({"metadata": {"name": "read-pods"}, "rules": [rule]})
    ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "read-pods"}
    everyone = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:authenticated"}
    binding = {"metadata": {"name": "read-pods"}, "roleRef": ref, "subjects": [everyone]}
    rbac.create_cluster_role_binding(binding)
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    as_jane = {"Impersonate-User": "jane"}
    code, answer, _ = request(
        kube, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", review, headers=as_jane
    )
    assert code == 201 and answer["status"]["userInfo"]["groups"] == ["system:authenticated"], answer
    assert request(kube, "GET", f"{PODS}/p", headers=as_jane)[0] == 200
    as_outsider = {**as_jane, "Impersonate-Group": "system:unauthenticated"}
    assert request(kube, "GET", f"{PODS}/p", headers=as_outsider)[0] == 403


def test_an_error_is_the_api_servers_status_byte_for_byte(kube: Kube) -> None:
    raw = urllib.request.Request(kube.handle.url + f"{PODS}/nope", headers=kube.handle.admin_headers)
    with pytest.raises(urllib.error.HTTPError) as failed:
        urllib.request.urlopen(raw, timeout=10, context=kube.handle.ssl_context)
    assert failed.value.read() == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods \\"nope\\" not'
        b' found","reason":"NotFound","details":{"name":"nope","kind":"pods"},"code":404}\n'
    )
