"""kubesim serves HTTPS, as every kube-apiserver does: a CA of its own and a serving certificate from it.

Clients trust the CA through the kubeconfig kubesim writes (`certificate-authority-data`), as they trust a
cluster's. It matters beyond form: client-go (kubectl) sends a kubeconfig's credentials only over TLS.
"""

from __future__ import annotations

import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from shared.access.authority import Authority
from shared.access.private_files import write_private

# Names the serving certificate holds: loopback, the in-cluster Service, and compose's host name.
DEFAULT_NAMES = ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubesim")
# The `kubernetes` Service's address: in-cluster clients (pods kubesim runs as processes) reach the API
# server there, and verify it against this certificate.
KUBERNETES_SERVICE_IP = "127.96.0.1"
DEFAULT_IPS = ("127.0.0.1", "::1", KUBERNETES_SERVICE_IP)


@dataclass(frozen=True)
class ServingCert:
    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes
    authority: Authority | None = None  # kubesim's CA, to issue client certificates (`client_cert`)

    def client_cert(self, user: str, groups: tuple[str, ...] = ()) -> tuple[bytes, bytes]:
        """A client certificate of kubesim's CA for `user` (CN) in `groups` (O), as a cluster's CA signs
        them (`kubeadm kubeconfig user`, the CSR API): (certificate, key) in PEM."""
        assert self.authority is not None
        return self.authority.leaf(user, client=True, organizations=groups)

    def server_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        # A client may present a certificate (kube-apiserver's --client-ca-file): verified if given.
        context.verify_mode = ssl.CERT_OPTIONAL
        context.load_verify_locations(cadata=self.ca_pem.decode())
        with tempfile.TemporaryDirectory(prefix="kubesim-tls-") as directory:
            cert, key = Path(directory) / "tls.crt", Path(directory) / "tls.key"
            cert.write_bytes(self.cert_pem + self.ca_pem)
            write_private(key, self.key_pem)
            context.load_cert_chain(cert, key)
        return context

    def client_context(self) -> ssl.SSLContext:
        """A client context that trusts this kubesim only."""
        return ssl.create_default_context(cadata=self.ca_pem.decode())


def issue(extra_names: tuple[str, ...] = ()) -> ServingCert:
    """A fresh CA and a serving certificate for loopback, the in-cluster names and `extra_names`."""
    ca = Authority.new("kubesim-ca")
    cert, key = ca.leaf("kube-apiserver", names=DEFAULT_NAMES + extra_names, ips=DEFAULT_IPS)
    return ServingCert(ca.pem, cert, key, ca)
