"""`podherd certs`: what deploy/ mounts, made without cert-manager: a CA of its own with the NATS
certificates (`nats_pki`), and a password for each service's Redis user (`shared.redis_acl`), as Secrets;
with `--dir`, the files too, the CA's key and the Redis users' `ACL SETUSER` lines among them."""

from __future__ import annotations

import base64
import secrets
import shutil
import tempfile
from pathlib import Path
from typing import Any

import yaml

from podherd import nats_pki
from shared.redis_acl import REDIS_SERVICES, setuser_lines


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


def new_passwords() -> dict[str, str]:
    return {service: secrets.token_urlsafe(24) for service in REDIS_SERVICES}


def secrets_yaml(namespace: str, *, keep: str | None = None, key_prefix: str = "podherd") -> str:
    """The Secrets, as YAML; the files are kept in `keep` (with `redis-acl.txt`), else removed."""
    directory = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="podherd-certs-"))
    try:
        passwords = new_passwords()
        docs = nats_pki.secrets(nats_pki.issue(directory), namespace) + redis_secrets(passwords, namespace)
        if keep:
            acl = directory / "redis-acl.txt"
            acl.write_text(setuser_lines(key_prefix, passwords))
            acl.chmod(0o600)
        return str(yaml.safe_dump_all(docs, sort_keys=False))
    finally:
        if not keep:
            shutil.rmtree(directory)
