"""`podherd certs [PART…] [--dir DIR]`: the Secrets deploy/ mounts, made without cert-manager, part by part.

With `--dir`, the directory is the record: its CA (`ca.crt`, `ca.key`) issues every certificate, the first
run makes it and later runs reuse it, and a certificate or password already there is kept (the NATS
certificates in `nats/<user>/`, the others in `redis-server/`, `gate/`, `apiserver-client/`). Run again,
the command prints the same Secrets, so `kubectl apply` changes nothing that exists; a part asked for the
first time is added beside them from the same CA. Without `--dir` a new CA is made and kept nowhere, which
is said on standard error.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

from podherd import nats_pki
from podherd.arguments import CERT_PARTS
from podherd.credentials import (
    API_SERVER_CLIENT_SECRET,
    GATE_PATCH_FILES,
    GATE_SECRET,
    REDIS_SERVER_SECRET,
    api_server_client_secret,
    gate_ca_bundle_patch,
    gate_secret,
    keep_secret_files,
    new_passwords,
    redis_secrets,
    redis_server_secret,
    tls_secret,
    valkey_common_conf,
    write_api_server_client,
)
from shared.access.authority import Authority
from shared.access.private_files import write_private
from shared.ledger.acl import REDIS_SERVICES, setuser_lines

PARTS: Final = CERT_PARTS
PASSWORDS_FILE: Final = "redis-passwords.yaml"
# Where `--dir` keeps each TLS Secret's files, and the Secret's name.
SECRET_NAMES: Final = {
    "redis-server": REDIS_SERVER_SECRET,
    "gate": GATE_SECRET,
    "apiserver-client": API_SERVER_CLIENT_SECRET,
}


@dataclass(frozen=True)
class Made:
    """What a run printed and whether it made a new CA that is kept nowhere."""

    yaml: str
    ephemeral_ca: bool


@dataclass(frozen=True)
class Run:
    namespace: str
    directory: Path
    keep: bool
    authority: Authority
    key_prefix: str


def authority_of(directory: Path) -> Authority:
    """The CA kept in `directory`, or a new one written there."""
    cert, key = directory / "ca.crt", directory / "ca.key"
    if cert.exists() and key.exists():
        return Authority.load(cert.read_bytes(), key.read_bytes())
    made = Authority.new("podherd-ca")
    directory.mkdir(parents=True, exist_ok=True)
    cert.write_bytes(made.pem)
    write_private(key, made.key_pem)
    return made


def passwords_of(directory: Path, *, keep: bool) -> dict[str, str]:
    """Each Redis user's password: those kept in `directory` (with `keep`), new ones for the others."""
    path = directory / PASSWORDS_FILE
    kept = (yaml.safe_load(path.read_text()) or {}) if keep and path.exists() else {}
    fresh = new_passwords()
    passwords = {service: str(kept.get(service) or fresh[service]) for service in REDIS_SERVICES}
    if keep:
        write_private(path, yaml.safe_dump(passwords))
    return passwords


def _secret_kept(run: Run, name: str, make: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """A TLS Secret made once: read back from `<dir>/<name>/` when that holds one of this CA, else made (and,
    with `--dir`, kept there)."""
    where = run.directory / name
    files = {f: where / f for f in ("ca.crt", "tls.crt", "tls.key")}
    if run.keep and _kept(files, run.authority.pem):
        return tls_secret(run.namespace, SECRET_NAMES[name], {f: p.read_bytes() for f, p in files.items()})
    secret = make()
    if run.keep:
        keep_secret_files(secret, where)
    return secret


def _kept(files: dict[str, Path], ca_pem: bytes) -> bool:
    return all(p.exists() for p in files.values()) and files["ca.crt"].read_bytes() == ca_pem


def _nats(run: Run) -> list[dict[str, Any]]:
    pki = nats_pki.issue(run.directory / "nats", authority=run.authority, keep_existing=run.keep)
    return nats_pki.secrets(pki, run.namespace)


def _redis_server(run: Run) -> list[dict[str, Any]]:
    return [_secret_kept(run, "redis-server", lambda: redis_server_secret(run.authority, run.namespace))]


def _gate(run: Run) -> list[dict[str, Any]]:
    secret = _secret_kept(run, "gate", lambda: gate_secret(run.authority, run.namespace))
    if run.keep:
        for kind, file in GATE_PATCH_FILES.items():
            (run.directory / file).write_text(json.dumps(gate_ca_bundle_patch(run.authority.pem, kind)))
    return [secret]


def _apiserver_client(run: Run) -> list[dict[str, Any]]:
    secret = _secret_kept(
        run, "apiserver-client", lambda: api_server_client_secret(run.authority, run.namespace)
    )
    if run.keep:
        write_api_server_client(secret, run.directory)
    return [secret]


def _redis_passwords(run: Run) -> list[dict[str, Any]]:
    passwords = passwords_of(run.directory, keep=run.keep)
    if run.keep:
        write_private(run.directory / "redis-acl.txt", setuser_lines(run.key_prefix, passwords))
        (run.directory / "valkey.common.conf").write_text(valkey_common_conf(run.key_prefix, passwords))
    return redis_secrets(passwords, run.namespace)


MAKERS: Final[dict[str, Callable[[Run], list[dict[str, Any]]]]] = {
    "nats": _nats,
    "redis-server": _redis_server,
    "gate": _gate,
    "apiserver-client": _apiserver_client,
    "redis-passwords": _redis_passwords,
}
assert tuple(MAKERS) == PARTS


def make(
    namespace: str, parts: tuple[str, ...] = PARTS, *, keep: str | None = None, key_prefix: str = "podherd"
) -> Made:
    """The Secrets of `parts`, as YAML, in PARTS' order."""
    directory = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="podherd-certs-"))
    try:
        run = Run(namespace, directory, bool(keep), authority_of(directory), key_prefix)
        docs = [doc for part in PARTS if part in parts for doc in MAKERS[part](run)]
        return Made(str(yaml.safe_dump_all(docs, sort_keys=False)), ephemeral_ca=not keep)
    finally:
        if not keep:
            shutil.rmtree(directory)
