"""NATS as `deploy/` runs it, for the demo and the tests: TLS from a CA of Podherd's own, every client by
certificate, each certificate mapped to its NATS user (`verify_and_map`) with the rights of
`shared.nats.permissions`. The files are what a cert-manager Certificate's Secret holds (`ca.crt`,
`tls.crt`, `tls.key`), one directory per user.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared.access.authority import Authority
from shared.access.private_files import write_private
from shared.config.model import NatsConfig, Tls
from shared.nats import bus
from shared.nats.access import Access
from shared.nats.permissions import AUDITOR, INTENT_SENDER, OPERATOR, SERVICES, accounts

SERVER = "nats-server"
HARNESS = "podherd-harness"
USERS = (*(f"podherd-{s}" for s in SERVICES), INTENT_SENDER, AUDITOR, OPERATOR)
TEST_USERS = (*USERS, HARNESS)
# The names clients reach NATS by: deploy/'s Service, and each server of the chart's StatefulSet (deploy/ha).
SERVER_NAMES = (
    "localhost",
    "nats",
    "nats.podherd.svc",
    "nats.podherd.svc.cluster.local",
    "*.nats-headless.podherd.svc",
    "*.nats-headless.podherd.svc.cluster.local",
)


@dataclass(frozen=True)
class Pki:
    directory: Path

    @property
    def ca(self) -> Path:
        return self.directory / "ca.crt"

    def tls(self, user: str) -> Tls:
        """The files a client presents as `user` (a directory like a mounted Secret)."""
        where = self.directory / user
        return Tls(ca=str(self.ca), cert=str(where / "tls.crt"), key=str(where / "tls.key"))

    def server_conf(self, *prefixes: str, harness: bool = False) -> str:
        """TLS requiring a client certificate mapped to a user; the accounts of Podherd's users, each with
        its rights under every one of `prefixes` (deployments sharing the server), and with `harness` a
        user that may do anything (the chaos run's faults and checks: never deployed)."""
        blocks = accounts(bus.Subjects(prefixes[0]))
        users = next(iter(blocks.values()))["users"]
        for prefix in prefixes[1:]:
            more = next(iter(accounts(bus.Subjects(prefix)).values()))["users"]
            for user, extra in zip(users, more, strict=True):
                for way in ("publish", "subscribe"):
                    allowed = user["permissions"][way]["allow"]
                    allowed += [a for a in extra["permissions"][way]["allow"] if a not in allowed]
        if harness:
            rights = {"publish": {"allow": [">"]}, "subscribe": {"allow": [">"]}}
            users.append({"user": f"CN={HARNESS}", "permissions": rights})
        return self.tls_conf() + f"accounts: {json.dumps(blocks)}\n"

    def options(self, user: str) -> dict[str, Any]:
        """nats-py's connect options for `user`."""
        return Access(NatsConfig(tls=self.tls(user))).options

    def tls_conf(self) -> str:
        """The server's TLS block: its certificate, the CA, and every client by certificate, mapped."""
        server = self.directory / SERVER
        tls = {
            "cert_file": str(server / "tls.crt"),
            "key_file": str(server / "tls.key"),
            "ca_file": str(self.ca),
            "verify_and_map": True,
            "timeout": 5,
        }
        return f"tls: {json.dumps(tls)}\n"


def issue(
    directory: Path,
    users: tuple[str, ...] = USERS,
    *,
    authority: Authority | None = None,
    keep_existing: bool = False,
) -> Pki:
    """A CA (or `authority`), the server's certificate for loopback and the in-cluster names, and one
    client certificate per user, written under `directory`. `keep_existing`: a certificate of the same CA
    already there is kept as it is (issuing again changes nothing that exists)."""
    ca = authority or Authority.new("podherd-nats-ca")
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "ca.crt").write_bytes(ca.pem)
    write_private(directory / "ca.key", ca.key_pem)
    for name in (SERVER, *users):
        where = directory / name
        if keep_existing and _issued_by(where, ca.pem):
            continue
        if name == SERVER:
            cert, key = ca.leaf(SERVER, names=SERVER_NAMES, ips=("127.0.0.1",))
        else:
            cert, key = ca.leaf(name, client=True)
        where.mkdir(exist_ok=True)
        (where / "ca.crt").write_bytes(ca.pem)
        (where / "tls.crt").write_bytes(cert)
        write_private(where / "tls.key", key)
    return Pki(directory)


def _issued_by(where: Path, ca_pem: bytes) -> bool:
    files = [where / f for f in ("ca.crt", "tls.crt", "tls.key")]
    return all(f.exists() for f in files) and files[0].read_bytes() == ca_pem


def secrets(pki: Pki, namespace: str) -> list[dict[str, Any]]:
    """The PKI as the Secrets deploy/ mounts (what deploy/cert-manager's Certificates would make): the
    server's `nats-server-tls` and each user's `<user>-nats`, each holding ca.crt, tls.crt and tls.key."""
    docs = []
    for name in (SERVER, *sorted(p.name for p in pki.directory.iterdir() if p.is_dir() and p.name != SERVER)):
        where = pki.directory / name
        data = {
            f: base64.b64encode((where / f).read_bytes()).decode() for f in ("ca.crt", "tls.crt", "tls.key")
        }
        secret = "nats-server-tls" if name == SERVER else f"{name}-nats"
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "type": "kubernetes.io/tls",
                "metadata": {"name": secret, "namespace": namespace},
                "data": data,
            }
        )
    return docs
