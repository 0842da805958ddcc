"""kubesim authenticates and authorizes as kube-apiserver does: TLS, issued tokens only, anonymous requests
held to the public paths, impersonation for administrators, and access reviews answered from RBAC."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kubesim.sim import SimHandle
from podherd.install import install, service_account, service_token
from shared.config.model import KubernetesConfig
from shared.kube.client import KubeClient
from tests.kubesim.test_kubectl import KUBECTL, kubectl

pytestmark = [pytest.mark.integration, pytest.mark.denials_expected]
EXECUTOR = "system:serviceaccount:{}:{}".format(*service_account("executor"))


def call(
    handle: SimHandle,
    path: str,
    token: str | None = None,
    method: str = "GET",
    body: Any = None,
    **headers: str,
) -> tuple[int, Any]:
    request = urllib.request.Request(
        handle.url + path,
        data=json.dumps(body).encode() if body is not None else None,
        method=method,
        headers={
            **({"Authorization": f"Bearer {token}"} if token else {}),
            **({"Content-Type": "application/json"} if body is not None else {}),
            **{k.replace("_", "-"): v for k, v in headers.items()},
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=10, context=handle.ssl_context) as response:
            raw = response.read()
            return response.status, json.loads(raw) if raw.startswith(b"{") else raw.decode()
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


@pytest.fixture
def cluster(kubesim_factory: Callable[..., SimHandle]) -> tuple[SimHandle, KubeClient]:
    handle = kubesim_factory("small")
    admin = KubeClient.from_config(KubernetesConfig(kubeconfig=str(handle.kubeconfig)))
    install(admin, rbac=True)
    return handle, admin


def test_only_kubesims_own_credential_is_the_administrator(cluster: tuple[SimHandle, KubeClient]) -> None:
    handle, _ = cluster
    assert handle.url.startswith("https://")
    assert call(handle, "/version")[0] == 200 and call(handle, "/healthz") == (200, "ok")
    assert call(handle, "/api") == (
        403,
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": 'forbidden: User "system:anonymous" cannot get path "/api"',
            "reason": "Forbidden",
            "details": {},
            "code": 403,
        },
    )
    code, status = call(handle, "/api/v1/namespaces/default/pods")
    assert (code, status["message"]) == (
        403,
        'pods is forbidden: User "system:anonymous" cannot list resource "pods" in API group "" in the'
        ' namespace "default"',
    )
    for forged in ("kubesim", "serviceaccount:podherd:podherd-executor", handle.admin_token[:-1] + "x"):
        assert call(handle, "/api/v1/nodes", forged) == (
            401,
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": "Unauthorized",
                "reason": "Unauthorized",
                "code": 401,
            },
        )
    assert call(handle, "/api/v1/nodes", handle.admin_token)[0] == 200


def test_service_account_tokens_come_from_token_requests_and_die_with_the_account(
    cluster: tuple[SimHandle, KubeClient],
) -> None:
    handle, admin = cluster
    token = service_token(admin, "executor")
    assert (
        call(handle, "/api/v1/namespaces/default/pods/none", token)[0] == 404
    )  # its ClusterRole lets it look
    code, status = call(handle, "/api/v1/nodes", token)
    assert (code, status["message"]) == (
        403,
        f'nodes is forbidden: User "{EXECUTOR}" cannot list resource "nodes" in API group ""'
        " at the cluster scope",
    )
    short = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": 60},
    }
    path = "/api/v1/namespaces/podherd/serviceaccounts/podherd-executor/token"
    code, status = call(handle, path, handle.admin_token, "POST", short)
    assert (code, status["message"]) == (
        422,
        'TokenRequest.authentication.k8s.io "podherd-executor" is invalid: spec.expirationSeconds: Invalid'
        " value: 60: may not specify a duration less than 10 minutes",
    )
    missing = "/api/v1/namespaces/podherd/serviceaccounts/nobody/token"
    assert call(handle, missing, handle.admin_token, "POST", {"spec": {}})[0] == 404
    admin.request("DELETE", "/api/v1/namespaces/podherd/serviceaccounts/podherd-executor")
    assert call(handle, "/api/v1/namespaces/default/pods/none", token)[0] == 401


def test_administrators_impersonate_and_others_may_not(cluster: tuple[SimHandle, KubeClient]) -> None:
    handle, admin = cluster
    as_executor = {"Impersonate_User": EXECUTOR}
    assert call(handle, "/api/v1/namespaces/default/pods/none", handle.admin_token, **as_executor)[0] == 404
    code, status = call(handle, "/api/v1/nodes", handle.admin_token, **as_executor)
    assert (code, EXECUTOR in status["message"]) == (403, True)
    watcher = service_token(admin, "watcher")
    code, status = call(handle, "/api/v1/nodes", watcher, Impersonate_User="kubernetes-admin")
    assert (code, status["message"]) == (
        403,
        'users "kubernetes-admin" is forbidden: User "system:serviceaccount:podherd:podherd-watcher" cannot'
        ' impersonate resource "users" in API group "" at the cluster scope',
    )


def test_access_reviews_answer_from_rbac(cluster: tuple[SimHandle, KubeClient]) -> None:
    handle, admin = cluster
    review: dict[str, Any] = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": EXECUTOR,
            "resourceAttributes": {
                "namespace": "default",
                "verb": "create",
                "resource": "pods",
                "subresource": "eviction",
            },
        },
    }
    code, answer = call(
        handle, "/apis/authorization.k8s.io/v1/subjectaccessreviews", handle.admin_token, "POST", review
    )
    assert code == 201 and answer["status"]["allowed"] is True
    assert answer["status"]["reason"].startswith('RBAC: allowed by ClusterRoleBinding "podherd-executor"')
    review["spec"]["resourceAttributes"] = {"verb": "delete", "resource": "nodes"}
    _, answer = call(
        handle, "/apis/authorization.k8s.io/v1/subjectaccessreviews", handle.admin_token, "POST", review
    )
    assert answer["status"] == {"allowed": False}
    token = service_token(admin, "executor")
    rules = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectRulesReview",
        "spec": {"namespace": "default"},
    }
    code, answer = call(handle, "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", token, "POST", rules)
    assert code == 201 and any("pods/eviction" in r["resources"] for r in answer["status"]["resourceRules"])
    # A service may review itself (system:basic-user), not others.
    assert call(handle, "/apis/authorization.k8s.io/v1/subjectaccessreviews", token, "POST", review)[0] == 403


def test_a_binding_removed_or_restored_takes_effect_on_the_next_request(
    cluster: tuple[SimHandle, KubeClient],
) -> None:
    handle, admin = cluster
    token = service_token(admin, "executor")
    reservations = "/apis/scheduling.koordinator.sh/v1alpha1/reservations"  # the executor's role lists them
    binding_path = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/podherd-executor"
    assert call(handle, reservations, token)[0] == 200
    code, binding = call(handle, binding_path, handle.admin_token)
    assert code == 200
    assert call(handle, binding_path, handle.admin_token, "DELETE")[0] == 200
    code, answer = call(handle, reservations, token)
    assert code == 403 and answer["reason"] == "Forbidden", answer
    restored = {k: v for k, v in binding.items() if k != "metadata"}
    restored["metadata"] = {"name": binding["metadata"]["name"]}
    code, _ = call(
        handle, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", handle.admin_token, "POST", restored
    )
    assert code == 201
    assert call(handle, reservations, token)[0] == 200


@pytest.mark.kubectl
@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH: install kubectl (v1.32)")
def test_kubectl_auth_can_i_answers_for_a_service_account(
    cluster: tuple[SimHandle, KubeClient], tmp_path: Path
) -> None:
    handle, admin = cluster

    def can_i(*args: str, kubeconfig: Path = handle.kubeconfig) -> tuple[int, str]:
        assert KUBECTL is not None
        env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(tmp_path)}
        done = subprocess.run(
            [KUBECTL, "auth", "can-i", *args],
            capture_output=True,
            text=True,
            env=env,
            check=False,
            timeout=60,
        )
        return done.returncode, done.stdout.strip()

    assert can_i("create", "pods", "--subresource=eviction", f"--as={EXECUTOR}") == (0, "yes")
    # kubectl reads `pods/eviction` as the pod named "eviction": creating pods is not the executor's.
    assert can_i("create", "pods/eviction", f"--as={EXECUTOR}") == (1, "no")
    assert can_i("list", "nodes", f"--as={EXECUTOR}") == (1, "no")
    executor = handle.kubeconfig_for(tmp_path / "executor", service_token(admin, "executor"))
    assert can_i("create", "pods", "--subresource=eviction", kubeconfig=executor) == (0, "yes")
    assert can_i("delete", "nodes", kubeconfig=executor) == (1, "no")
    # A token as a person gets one, and who it makes you.
    token = kubectl(handle, "create", "token", "podherd-executor", "-n", "podherd", "--duration=20m").strip()
    who = json.loads(kubectl(handle, f"--token={token}", "auth", "whoami", "-o", "json"))
    assert who["status"]["userInfo"]["username"] == EXECUTOR
    assert "system:serviceaccounts:podherd" in who["status"]["userInfo"]["groups"]
