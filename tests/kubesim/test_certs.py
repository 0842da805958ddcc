"""kubesim authenticates client certificates of its CA, as kube-apiserver does with --client-ca-file: the
certificate's CN is the user and its Os the groups, held to RBAC like any user; kubectl and the official
client use such a kubeconfig unchanged; a certificate of another CA never completes the handshake."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import kubernetes
import pytest
import urllib3.exceptions

from kubesim.sim import SimHandle, write_kubeconfig
from shared.access.authority import Authority
from tests.kube import client_for
from tests.kubesim.test_kubectl import KUBECTL

pytestmark = pytest.mark.integration


def kubectl_as(kubeconfig: Path, *args: str, check: bool = True) -> str:
    """kubectl with `kubeconfig` as it is: its output, and its errors after it."""
    assert KUBECTL is not None
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(kubeconfig.parent)}
    done = subprocess.run([KUBECTL, *args], capture_output=True, text=True, timeout=60, check=False, env=env)
    assert not check or done.returncode == 0, done.stderr
    return done.stdout + done.stderr


@pytest.mark.kubectl
@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH")
def test_a_client_certificate_is_its_user_and_groups_under_rbac(
    kubesim_factory: Callable[..., SimHandle], tmp_path: Path
) -> None:
    handle = kubesim_factory()
    alice = handle.kubeconfig_with_cert(tmp_path / "alice", "alice", ("team-x", "auditors"))
    whoami = json.loads(kubectl_as(alice, "auth", "whoami", "-o", "json"))
    assert whoami["status"]["userInfo"] == {
        "username": "alice",
        "groups": ["team-x", "auditors", "system:authenticated"],
    }
    assert "Forbidden" in kubectl_as(alice, "get", "pods", check=False)  # no role bound: nothing
    admin = client_for(handle)
    rbac = admin.client("RbacAuthorizationV1Api")
    rbac.create_cluster_role(
        {
            "metadata": {"name": "pod-reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}],
        }
    )
    binding = {
        "metadata": {"name": "team-x-reads"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "pod-reader"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "team-x"}],
    }
    rbac.create_namespaced_role_binding("default", binding)
    api = kubernetes.config.new_client_from_config(config_file=str(alice))
    assert kubernetes.client.CoreV1Api(api).list_namespaced_pod("default").items == []  # by its group
    with pytest.raises(kubernetes.client.ApiException) as refused:
        kubernetes.client.CoreV1Api(api).list_namespaced_pod("kube-system")
    assert refused.value.status == 403
    api.close()


def test_a_certificate_of_another_ca_is_refused(
    kubesim_factory: Callable[..., SimHandle], tmp_path: Path
) -> None:
    handle = kubesim_factory()
    cert = Authority.new("elsewhere").leaf("kubernetes-admin", client=True, organizations=("system:masters",))
    path = write_kubeconfig(handle.url, tmp_path / "forged", None, ca_pem=handle.ca_pem, cert=cert)
    api = kubernetes.config.new_client_from_config(config_file=str(path))
    # The server ends the TLS connection (with TLS 1.3 the client learns it at its first read): no answer
    # at all, not even a 401, as with kube-apiserver.
    with pytest.raises(urllib3.exceptions.MaxRetryError):
        kubernetes.client.CoreV1Api(api).list_namespaced_pod("default", _request_timeout=10)
    api.close()
