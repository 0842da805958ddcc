"""The side doors, tried as someone who may not evict a pod would try them, against the gate as deployed (its
processes, called by the API server's admission chain, RBAC on): every annotation that steers a move needs
its own permission, status and Podherd's bookkeeping are Podherd's alone, the requester is who the API server
says wrote the job, the gate's job names are the gate's, and the gate's port starts no job for a caller it
cannot verify as the API server."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from podherd.harness.processes import webhook_port
from services.gate.evacuation import job_name
from shared.access.authority import Authority
from shared.api.names import (
    ANNOTATION_ABORT,
    ANNOTATION_LEDGER,
    ANNOTATION_LIFTS,
    ANNOTATION_MIGRATION_PRIORITY,
    ANNOTATION_REQUESTER,
    ANNOTATION_STRATEGY,
    ANNOTATION_TARGET_NODE,
)
from tests.e2e.test_gate import GROUP, VERSION, Gated, evict, gated, get_job, pod, user_kube
from tests.kube import Kube, refusal

pytestmark = [pytest.mark.e2e, pytest.mark.integration]
__all__ = ["gated"]  # the fixture
JOBS = "podmigrationjobs"
AUTHOR = [{"apiGroups": [GROUP], "resources": [JOBS], "verbs": ["create", "get", "update", "patch"]}]


def made(kube: Kube, name: str, pod_name: str, annotations: dict[str, str] | None = None) -> tuple[int, str]:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PodMigrationJob",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {"podRef": {"kind": "Pod", "namespace": "default", "name": pod_name}, "paused": True},
    }
    try:
        kube.custom.create_cluster_custom_object(GROUP, VERSION, JOBS, body)
    except kubernetes.client.ApiException as exc:
        return exc.status, str(refusal(exc).get("message"))
    return 201, ""


def patched(kube: Kube, name: str, patch: dict[str, Any], *, status: bool = False) -> tuple[int, str]:
    write = (
        kube.custom.patch_cluster_custom_object_status if status else kube.custom.patch_cluster_custom_object
    )
    try:
        write(GROUP, VERSION, JOBS, name, patch)
    except kubernetes.client.ApiException as exc:
        return exc.status, str(refusal(exc).get("message"))
    return 200, ""


def web_pod(gated: Gated) -> Any:
    return gated.kube.core.list_namespaced_pod("default", label_selector="app=web").items[0]


def test_each_thing_a_job_asks_for_needs_its_own_permission_and_the_requester_is_the_author(
    gated: Gated,
) -> None:
    mallory = user_kube(gated, "mallory", AUTHOR, evict_in="default")
    who = "system:serviceaccount:default:mallory"
    web = web_pod(gated).metadata
    deployment = "web"
    bare = pod(gated.kube, "default", "solo")["metadata"]["name"]
    asks = [
        (
            {ANNOTATION_TARGET_NODE: "node-2"},
            web.name,
            f"create pods/binding {web.name} in namespace default",
        ),
        (
            {ANNOTATION_STRATEGY: "Surge"},
            web.name,
            f"deployments/scale.apps {deployment} in namespace default",
        ),
        ({ANNOTATION_LIFTS: "BarePod"}, bare, f"delete pods {bare} in namespace default"),
        ({ANNOTATION_MIGRATION_PRIORITY: "10"}, web.name, "create podmigrationjobs/priority"),
    ]
    for i, (steering, target, missing) in enumerate(asks):
        code, message = made(mallory, f"steer-{i}", target, steering)
        assert code == 403 and f'user "{who}" may not' in message and missing in message, message
    for kept, name in (({ANNOTATION_LEDGER: "{}"}, "ledger"), ({}, job_name(web.uid))):
        code, message = made(mallory, name, web.name, kept)
        assert (code == 403 and "Podherd" in message) or "the gate's" in message, message

    # A plain job is hers; the requester she wrote is replaced by who the API server says she is.
    assert made(mallory, "plain", web.name, {ANNOTATION_REQUESTER: "kubernetes-admin"}) == (201, "")
    job = get_job(gated.kube, "plain")
    assert job is not None and job["metadata"]["annotations"][ANNOTATION_REQUESTER] == who
    # Steering added later is asked for as at creation; the name cannot be changed.
    pin = {"metadata": {"annotations": {ANNOTATION_TARGET_NODE: "node-2"}}}
    code, message = patched(mallory, "plain", pin)
    assert code == 403 and "create pods/binding" in message, message
    code, message = patched(mallory, "plain", {"metadata": {"annotations": {ANNOTATION_REQUESTER: "x"}}})
    assert code == 403 and ANNOTATION_REQUESTER in message, message
    # Given the right kubectl needs to bind, the same pin is hers to ask for.
    rbac = gated.kube.client("RbacAuthorizationV1Api")
    bind = [{"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]}]
    rbac.create_namespaced_role("default", {"metadata": {"name": "bind"}, "rules": bind})
    subject = [{"kind": "ServiceAccount", "name": "mallory", "namespace": "default"}]
    ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "bind"}
    rbac.create_namespaced_role_binding(
        "default", {"metadata": {"name": "bind"}, "roleRef": ref, "subjects": subject}
    )
    assert patched(mallory, "plain", pin) == (200, "")


def test_status_and_an_abort_of_another_s_job_are_refused_to_an_editor(gated: Gated) -> None:
    web = web_pod(gated).metadata
    assert made(gated.kube, "admins", web.name) == (201, "")
    editor_rules = [
        {"apiGroups": [GROUP], "resources": [JOBS, f"{JOBS}/status"], "verbs": ["get", "update", "patch"]}
    ]
    editor = user_kube(gated, "editor", editor_rules, evict_in="default")
    for phase in ("Running", "Succeeded"):
        code, message = patched(editor, "admins", {"status": {"phase": phase}}, status=True)
        assert code == 403 and "written only by Podherd's services" in message, message
    code, message = patched(editor, "admins", {"metadata": {"annotations": {ANNOTATION_ABORT: "mine now"}}})
    assert code == 403 and "delete podmigrationjobs.scheduling.koordinator.sh admins" in message, message
    job = get_job(gated.kube, "admins")
    assert job is not None and "status" not in job and ANNOTATION_ABORT not in job["metadata"]["annotations"]
    # Its author may abort it.
    abort = {"metadata": {"annotations": {ANNOTATION_ABORT: "changed my mind"}}}
    assert patched(gated.kube, "admins", abort) == (200, "")


def forged_eviction(namespace: str, name: str) -> bytes:
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "operation": "CREATE",
            "namespace": namespace,
            "name": name,
            "subResource": "eviction",
            "userInfo": {"username": "system:admin", "groups": ["system:masters"]},
        },
    }
    return json.dumps(review).encode()


def post(url: str, body: bytes, context: ssl.SSLContext) -> dict[str, Any]:
    sent = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(sent, context=context, timeout=10) as answer:
        response: dict[str, Any] = json.loads(answer.read())["response"]
    return response


def test_the_gates_port_starts_no_job_for_a_caller_it_cannot_verify(gated: Gated, tmp_path: Path) -> None:
    kube = gated.kube
    url = f"https://127.0.0.1:{webhook_port(gated.gate.replicas[0].log)}/evictions"
    anyone = ssl.create_default_context(cadata=gated.gate.ca.decode())
    web = kube.core.read_namespaced_pod("web-0", "shop").metadata
    answer = post(url, forged_eviction("shop", "web-0"), anyone)
    assert answer["allowed"] is False and answer["status"]["code"] == 403
    assert (
        "could not verify that this review came from the API server (no certificate"
        in answer["status"]["message"]
    )
    # A certificate of the cluster's CA for another name is no better; one of another CA is not let in.
    sim = gated.sim.sim
    assert sim is not None
    cert, key = sim.tls.client_cert("mallory")
    (tmp_path / "m.crt").write_bytes(cert)
    (tmp_path / "m.key").write_bytes(key)
    named = ssl.create_default_context(cadata=gated.gate.ca.decode())
    named.load_cert_chain(tmp_path / "m.crt", tmp_path / "m.key")
    answer = post(url, forged_eviction("shop", "web-0"), named)
    assert (
        answer["status"]["code"] == 403
        and "'mallory', not one of gate.clientNames" in answer["status"]["message"]
    )
    cert, key = Authority.new("elsewhere").leaf("kube-apiserver", client=True)
    (tmp_path / "e.crt").write_bytes(cert)
    (tmp_path / "e.key").write_bytes(key)
    foreign = ssl.create_default_context(cadata=gated.gate.ca.decode())
    foreign.load_cert_chain(tmp_path / "e.crt", tmp_path / "e.key")
    with pytest.raises((urllib.error.URLError, ssl.SSLError, ConnectionError)):
        post(url, forged_eviction("shop", "web-0"), foreign)
    assert get_job(kube, job_name(web.uid)) is None
    # The API server, presenting its certificate, is heard: the eviction becomes the pod's job.
    code, message = evict(kube, "shop", "web-0")
    assert code == 429 and "Eviction triggered evacuation" in message, message
    assert get_job(kube, job_name(web.uid)) is not None
