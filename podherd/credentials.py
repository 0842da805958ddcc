"""`podherd certs`: what deploy/ mounts, made without cert-manager: a CA of its own with the NATS
certificates (`nats_pki`), the Redis (Valkey) server's certificate from the same CA, and a password for each
service's Redis user (`shared.redis_acl`), as Secrets; with `--dir`, the files too, the CA's key and the
Redis users' `ACL SETUSER` lines, and the Valkey chart's commonConfiguration with those users (deploy/ha),
among them."""

from __future__ import annotations

import base64
import secrets
import shutil
import tempfile
from pathlib import Path
from typing import Any

import yaml

from kubesim.tls import Authority
from podherd import nats_pki
from podherd.install import DEPLOY
from shared.redis_acl import REDIS_SERVICES, config_lines, setuser_lines


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
    cert, key = authority.leaf("valkey-server", names=REDIS_SERVER_NAMES)
    files = {"ca.crt": authority.pem, "tls.crt": cert, "tls.key": key}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {"name": REDIS_SERVER_SECRET, "namespace": namespace},
        "data": {name: base64.b64encode(pem).decode() for name, pem in files.items()},
    }


def valkey_common_conf(key_prefix: str, passwords: dict[str, str]) -> str:
    """The Valkey chart's `commonConfiguration` of deploy/helm/valkey.values.yaml with the services' users
    (for `helm install --set-file commonConfiguration=...`): their passwords as SHA-256 only."""
    values = yaml.safe_load((DEPLOY / "helm" / "valkey.values.yaml").read_text())
    common = str(values.get("commonConfiguration") or "").rstrip("\n")
    return f"{common}\n{config_lines(key_prefix, passwords)}"


def new_passwords() -> dict[str, str]:
    return {service: secrets.token_urlsafe(24) for service in REDIS_SERVICES}


def secrets_yaml(namespace: str, *, keep: str | None = None, key_prefix: str = "podherd") -> str:
    """The Secrets, as YAML; the files are kept in `keep` (with `redis-acl.txt`), else removed."""
    directory = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="podherd-certs-"))
    try:
        passwords = new_passwords()
        authority = Authority.new("podherd-ca")
        docs = nats_pki.secrets(nats_pki.issue(directory, authority=authority), namespace)
        docs += [redis_server_secret(authority, namespace), *redis_secrets(passwords, namespace)]
        if keep:
            acl = directory / "redis-acl.txt"
            acl.write_text(setuser_lines(key_prefix, passwords))
            acl.chmod(0o600)
            (directory / "valkey.common.conf").write_text(valkey_common_conf(key_prefix, passwords))
        return str(yaml.safe_dump_all(docs, sort_keys=False))
    finally:
        if not keep:
            shutil.rmtree(directory)
