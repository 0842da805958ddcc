"""The real engine's credentials: a CA of its own, the API server's serving certificate, the client
certificate it presents to admission webhooks (`kube-apiserver`, as the security guide tells users to give
it one), the ServiceAccount token signing key, and a static token for the administrator and for each
control-plane component."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from kubesim.apiserver.serving import DEFAULT_IPS, DEFAULT_NAMES
from podherd.credentials import API_SERVER_CLIENT
from shared.access.authority import Authority
from shared.access.private_files import write_private

# Who each token is: the administrator (the kubeconfig a user gets) and the components, all in
# system:masters. The components are the test rig's, not Podherd's: Podherd's services run as their own
# ServiceAccounts with deploy/'s roles, as on any cluster.
IDENTITIES = {
    "admin": "podherd-admin",
    "kube-controller-manager": "system:kube-controller-manager",
    "koord-scheduler": "system:kube-scheduler",
    "kwok": "system:kwok-controller",
}


WEBHOOK_CLIENT = API_SERVER_CLIENT  # the name its webhook client certificate carries


@dataclass(frozen=True)
class Credentials:
    ca_pem: bytes
    tokens: dict[str, str]  # by component ("admin" for the administrator)


def issue(directory: Path) -> Credentials:
    """Write ca.crt, apiserver.crt/.key, sa.key/.pub and tokens.csv into `directory`."""
    ca = Authority.new("podherd-controlplane-ca")
    cert, key = ca.leaf("kube-apiserver", names=DEFAULT_NAMES, ips=(*DEFAULT_IPS, "10.96.0.1"))
    webhook_cert, webhook_key = ca.leaf(WEBHOOK_CLIENT, client=True)
    signing = ec.generate_private_key(ec.SECP256R1())
    tokens = {name: secrets.token_urlsafe(32) for name in IDENTITIES}
    files = {
        "ca.crt": ca.pem,
        "apiserver.crt": cert + ca.pem,
        "apiserver.key": key,
        "webhook-client.crt": webhook_cert,
        "webhook-client.key": webhook_key,
        "sa.key": signing.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ),
        "sa.pub": signing.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ),
        "tokens.csv": "".join(
            f'{tokens[name]},{user},{user},"system:masters"\n' for name, user in IDENTITIES.items()
        ).encode(),
    }
    directory.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        write_private(directory / name, data)
    return Credentials(ca.pem, tokens)
