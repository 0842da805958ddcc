"""Installing what Podherd needs on a cluster without kubectl (the demo and tests): the CRDs of `deploy/crds`
and the ServiceAccounts and least-privilege roles of `deploy/rbac`, exactly as `kubectl apply -k` would."""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any

import yaml

from shared.access.private_files import write_private
from shared.config.model import KubernetesConfig
from shared.kube.client import KubeClient, KubeError

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
NAMESPACE = "podherd"
# Each Podherd process with a ServiceAccount of its own (deploy/rbac): the pipeline's four, the planner
# and the admission gate.
SERVICE_ACCOUNTS = ("watcher", "arbitrator", "executor", "tracker", "planner", "gate")
_PATHS = {
    "CustomResourceDefinition": "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
    "Namespace": "/api/v1/namespaces",
    "ServiceAccount": "/api/v1/namespaces/{namespace}/serviceaccounts",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
}


def manifests(part: str) -> list[dict[str, Any]]:
    """The objects of one `deploy/` directory (its kustomization's resources), the caller's to change."""
    return copy.deepcopy(list(_parsed(part)))


@functools.cache
def _parsed(part: str) -> tuple[dict[str, Any], ...]:
    # Parsed once per process, with libyaml where PyYAML has it: Koordinator's CRDs, descriptions and all,
    # take a pure-Python parser a tenth of a second each.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    directory = DEPLOY / part
    listed = yaml.load((directory / "kustomization.yaml").read_text(), Loader=loader)["resources"]
    docs: list[dict[str, Any]] = []
    for name in listed:
        docs.extend(d for d in yaml.load_all((directory / name).read_text(), Loader=loader) if d)
    return tuple(docs)


def apply(kube: KubeClient, docs: list[dict[str, Any]], namespace: str = NAMESPACE) -> int:
    """Create each object; one that exists already is left as it is. Returns how many were created."""
    created = 0
    for doc in docs:
        path = _PATHS[doc["kind"]].format(namespace=namespace)
        try:
            kube.request("POST", path, body=doc, content_type="application/json")
            created += 1
        except KubeError as exc:
            if exc.status != 409:
                raise
    return created


def install(kube: KubeClient, rbac: bool = True) -> int:
    docs = manifests("crds")
    if rbac:
        docs += [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}]
        docs += manifests("rbac")
    return apply(kube, docs)


def service_account(service: str) -> tuple[str, str]:
    return NAMESPACE, f"podherd-{service}"


def service_token(kube: KubeClient, service: str, seconds: int = 86_400) -> str:
    """A token for the service's ServiceAccount (a TokenRequest, as the kubelet asks for a pod's)."""
    return account_token(kube, *service_account(service), seconds=seconds)


def account_token(
    kube: KubeClient, namespace: str, name: str, *, seconds: int = 86_400, audience: str | None = None
) -> str:
    """A TokenRequest for a ServiceAccount: for the API server, or for `audience` (Podherd's, for intents)."""
    spec: dict[str, Any] = {"expirationSeconds": seconds}
    if audience is not None:
        spec["audiences"] = [audience]
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}
    answer = kube.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
        body=body,
        content_type="application/json",
    )
    return str(json.loads(answer)["status"]["token"])


REQUESTER_ROLES = ("podherd-intent-sender", "podherd-drainer")


def requester_token(
    kube: KubeClient,
    name: str,
    *,
    audience: str,
    seconds: int = 86_400,
    roles: tuple[str, ...] = REQUESTER_ROLES,
) -> str:
    """A ServiceAccount `podherd/<name>` for a system that sends intents (the demo's planner and drains),
    bound cluster-wide to `roles` of `deploy/rbac/requesters.yaml`, and a token for it made for Podherd."""
    subject = {"kind": "ServiceAccount", "name": name, "namespace": NAMESPACE}
    docs: list[dict[str, Any]] = [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}}]
    docs += [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"{name}-{role}"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [subject],
        }
        for role in roles
    ]
    apply(kube, docs)
    return account_token(kube, NAMESPACE, name, seconds=seconds, audience=audience)


def service_kubeconfig(
    kube: KubeClient, admin_kubeconfig: Path, service: str, *, path: Path, seconds: int = 86_400
) -> Path:
    """A copy of `admin_kubeconfig` (same cluster, same trust) whose user is the service's ServiceAccount."""
    config = yaml.safe_load(admin_kubeconfig.read_text())
    context = next(
        (c for c in config.get("contexts") or [] if c["name"] == config.get("current-context")),
        (config.get("contexts") or [{}])[0],
    )
    cluster = next(c for c in config["clusters"] if c["name"] == context.get("context", {}).get("cluster"))
    namespace, name = service_account(service)
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [{"name": name, "user": {"token": service_token(kube, service, seconds)}}],
        "contexts": [
            {"name": name, "context": {"cluster": cluster["name"], "user": name, "namespace": namespace}}
        ],
        "current-context": name,
    }
    return write_private(path, yaml.safe_dump(document))


def install_with_accounts(
    admin_kubeconfig: Path, directory: Path, services: tuple[str, ...], *, seconds: int
) -> None:
    """Podherd's CRDs, namespace and roles installed with `admin_kubeconfig`, then `kubeconfig-<service>` in
    `directory` for each service, its ServiceAccount's (what compose's services use on kubesim)."""
    kube = KubeClient.from_config(KubernetesConfig(kubeconfig=str(admin_kubeconfig)))
    try:
        install(kube, rbac=True)
        for service in services:
            target = directory / f"kubeconfig-{service}"
            temporary = service_kubeconfig(
                kube, admin_kubeconfig, service, path=target.with_suffix(".tmp"), seconds=seconds
            )
            temporary.replace(target)
    finally:
        kube.close()


def requester_file(kube: KubeClient, path: Path, *, audience: str, name: str = "podherd-demo") -> Path:
    """`requester_token` written to `path`, where a client's `intents.tokenFile` reads it."""
    return write_private(path, requester_token(kube, name, audience=audience))
