"""What deploy/ mounts, as cert-manager's Certificates would make it, and the files beside it: the Redis
(Valkey) server's and the admission gate's certificates, kube-apiserver's client certificate for the gate,
the patches that give the gate's webhooks their CA, a password for each service's Redis user
(`shared.ledger.acl`) with their `ACL SETUSER` lines and the Valkey chart's commonConfiguration (deploy/ha).
`podherd.certs` puts them together."""

from __future__ import annotations

import base64
import secrets
from pathlib import Path
from typing import Any

import yaml

from podherd.install import DEPLOY
from shared.access.authority import Authority
from shared.access.private_files import write_private
from shared.ledger.acl import REDIS_SERVICES, config_lines


def redis_secrets(passwords: dict[str, str], namespace: str) -> list[dict[str, Any]]:
    """`podherd-<service>-redis`, holding its Redis user's `password`, for each service that uses Redis."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {"name": f"podherd-{service}-redis", "namespace": namespace},
            "data": {"password": base64.b64encode(password.encode()).decode()},
        }
        for service, password in passwords.items()
    ]


REDIS_SERVER_SECRET = "valkey-server-tls"
# The names the services reach Redis by: deploy/'s `redis` Service, or the Valkey chart's (deploy/ha).
REDIS_SERVER_NAMES = (
    *(
        f"{service}{domain}"
        for service in ("redis", "valkey")
        for domain in ("", ".podherd.svc", ".podherd.svc.cluster.local")
    ),
    "*.valkey-headless.podherd.svc",
    "*.valkey-headless.podherd.svc.cluster.local",
)


def redis_server_secret(authority: Authority, namespace: str) -> dict[str, Any]:
    """The Redis server's certificate, as deploy/cert-manager's `valkey-server-tls` Certificate makes it."""
    return server_secret(
        authority, namespace, REDIS_SERVER_SECRET, common_name="valkey-server", names=REDIS_SERVER_NAMES
    )


GATE_SECRET = "podherd-gate-tls"
GATE_NAMES = ("podherd-gate.podherd.svc", "podherd-gate.podherd.svc.cluster.local")  # the API server's


def gate_secret(authority: Authority, namespace: str) -> dict[str, Any]:
    """The gate's serving certificate, as deploy/cert-manager's `podherd-gate` Certificate makes it."""
    return server_secret(authority, namespace, GATE_SECRET, common_name="podherd-gate", names=GATE_NAMES)


# What `podherd certs --keep` writes for each of deploy/'s `podherd-gate` webhook configurations.
GATE_PATCH_FILES = {
    "ValidatingWebhookConfiguration": "gate-webhooks-patch.json",
    "MutatingWebhookConfiguration": "gate-mutating-webhooks-patch.json",
}


def gate_webhook_configurations() -> dict[str, dict[str, Any]]:
    """deploy/'s `podherd-gate` webhook configurations, by kind (validating and mutating)."""
    text = (DEPLOY / "base" / "gate-webhooks.yaml").read_text()
    return {d["kind"]: d for d in yaml.safe_load_all(text) if d}


def gate_ca_bundle_patch(ca_pem: bytes, kind: str = "ValidatingWebhookConfiguration") -> list[dict[str, Any]]:
    """A JSON patch giving every webhook of deploy/'s `podherd-gate` configuration of `kind` `ca_pem` as its
    caBundle (what cert-manager's CA injector does): `kubectl patch validatingwebhookconfiguration
    podherd-gate --type=json --patch-file gate-webhooks-patch.json`, and the mutating one likewise."""
    document = gate_webhook_configurations()[kind]
    bundle = base64.b64encode(ca_pem).decode()
    return [
        {"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": bundle}
        for i in range(len(document["webhooks"]))
    ]


API_SERVER_CLIENT = "kube-apiserver"  # the name (CN) the gate accepts its caller by (gate.clientNames)


def admission_configuration(kubeconfig: str) -> dict[str, Any]:
    """kube-apiserver's AdmissionConfiguration (`--admission-control-config-file`) giving both webhook
    plugins `kubeconfig`, whose credentials it presents to webhooks."""
    plugins = [
        {
            "name": name,
            "configuration": {
                "apiVersion": "apiserver.config.k8s.io/v1",
                "kind": "WebhookAdmissionConfiguration",
                "kubeConfigFile": kubeconfig,
            },
        }
        for name in ("ValidatingAdmissionWebhook", "MutatingAdmissionWebhook")
    ]
    return {"apiVersion": "apiserver.config.k8s.io/v1", "kind": "AdmissionConfiguration", "plugins": plugins}


def webhook_client_kubeconfig(
    cert: str, key: str, server: str = "podherd-gate.podherd.svc:443"
) -> dict[str, Any]:
    """The kubeconfig an AdmissionConfiguration names: the client certificate presented to the webhooks at
    `server` (`*`: every webhook)."""
    user = {"client-certificate": cert, "client-key": key}
    return {"apiVersion": "v1", "kind": "Config", "users": [{"name": server, "user": user}]}


def server_secret(
    authority: Authority, namespace: str, name: str, *, common_name: str, names: tuple[str, ...]
) -> dict[str, Any]:
    """A server's certificate of `authority` for `names`, as a cert-manager Certificate's Secret holds it."""
    cert, key = authority.leaf(common_name, names=names)
    return tls_secret(namespace, name, {"ca.crt": authority.pem, "tls.crt": cert, "tls.key": key})


def keep_secret_files(secret: dict[str, Any], directory: Path) -> None:
    """A TLS Secret's files in `directory` (`ca.crt`, `tls.crt`, `tls.key`: gate.cert and gate.key point at
    the last two when the gate runs outside the cluster); the key 0600."""
    directory.mkdir(parents=True, exist_ok=True)
    for file, data in secret["data"].items():
        pem = base64.b64decode(data)
        if file.endswith(".key"):
            write_private(directory / file, pem)
        else:
            (directory / file).write_bytes(pem)


def tls_secret(namespace: str, name: str, files: dict[str, bytes]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {"name": name, "namespace": namespace},
        "data": {file: base64.b64encode(pem).decode() for file, pem in files.items()},
    }


API_SERVER_CLIENT_SECRET = "podherd-apiserver-webhook-client"


def api_server_client_secret(authority: Authority, namespace: str) -> dict[str, Any]:
    """kube-apiserver's client certificate for the gate, as deploy/cert-manager's Certificate of that name
    makes it (the operator copies it to the control plane)."""
    cert, key = authority.leaf(API_SERVER_CLIENT, client=True)
    return tls_secret(
        namespace, API_SERVER_CLIENT_SECRET, {"ca.crt": authority.pem, "tls.crt": cert, "tls.key": key}
    )


def write_api_server_client(secret: dict[str, Any], directory: Path) -> None:
    """The client certificate kube-apiserver presents to the gate (its Secret's), and its admission
    configuration naming it where the guide has them copied (/etc/kubernetes/podherd on each control-plane
    node)."""
    data = {file: base64.b64decode(value) for file, value in secret["data"].items()}
    (directory / "apiserver-webhook-client.crt").write_bytes(data["tls.crt"])
    write_private(directory / "apiserver-webhook-client.key", data["tls.key"])
    there = "/etc/kubernetes/podherd"
    kubeconfig = webhook_client_kubeconfig(
        f"{there}/apiserver-webhook-client.crt", f"{there}/apiserver-webhook-client.key"
    )
    (directory / "webhook-client.kubeconfig").write_text(yaml.safe_dump(kubeconfig, sort_keys=False))
    admission = admission_configuration(f"{there}/webhook-client.kubeconfig")
    (directory / "admission-configuration.yaml").write_text(yaml.safe_dump(admission, sort_keys=False))


def valkey_common_conf(key_prefix: str, passwords: dict[str, str]) -> str:
    """The Valkey chart's `commonConfiguration` of deploy/helm/valkey.values.yaml with the services' users
    (for `helm install --set-file commonConfiguration=...`): their passwords as SHA-256 only."""
    values = yaml.safe_load((DEPLOY / "helm" / "valkey.values.yaml").read_text())
    common = str(values.get("commonConfiguration") or "").rstrip("\n")
    return f"{common}\n{config_lines(key_prefix, passwords)}"


def new_passwords() -> dict[str, str]:
    return {service: secrets.token_urlsafe(24) for service in REDIS_SERVICES}
