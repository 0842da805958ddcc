"""kubesim serves HTTPS, as every kube-apiserver does: a CA of its own and a serving certificate from it.

Clients trust the CA through the kubeconfig kubesim writes (`certificate-authority-data`), as they trust a
cluster's. It matters beyond form: client-go (kubectl) sends a kubeconfig's credentials only over TLS.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

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


@dataclass(frozen=True)
class Authority:
    """A certificate authority of its own (kubesim's; Podherd's test bench's for NATS and Redis), issuing
    serving and client certificates. EC P-256 keys, a year's validity from five minutes ago."""

    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @classmethod
    def new(cls, name: str) -> Authority:
        now = datetime.datetime.now(datetime.UTC)
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=365))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True
            )
            .sign(key, hashes.SHA256())
        )
        return cls(cert, key)

    @classmethod
    def load(cls, cert_pem: bytes, key_pem: bytes) -> Authority:
        """An authority kept before (`pem`, `key_pem`), to issue more from the same CA."""
        key = serialization.load_pem_private_key(key_pem, password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ValueError("the CA's key is not an EC key")
        return cls(x509.load_pem_x509_certificate(cert_pem), key)

    @property
    def pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        return self.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )

    def leaf(
        self,
        common_name: str,
        *,
        names: tuple[str, ...] = (),
        ips: tuple[str, ...] = (),
        client: bool = False,
        organizations: tuple[str, ...] = (),
    ) -> tuple[bytes, bytes]:
        """(certificate, key) in PEM: for serving `names` and `ips`, or (`client`) for TLS client
        authentication as `CN=common_name[,O=organization…]`."""
        now = datetime.datetime.now(datetime.UTC)
        key = ec.generate_private_key(ec.SECP256R1())
        attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
        attributes += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
        usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attributes))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=365))
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        )
        alt: list[x509.GeneralName] = [x509.DNSName(n) for n in dict.fromkeys(names)]
        alt += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
        if alt:
            builder = builder.add_extension(x509.SubjectAlternativeName(alt), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        return (
            cert.public_bytes(serialization.Encoding.PEM),
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            ),
        )


def issue(extra_names: tuple[str, ...] = ()) -> ServingCert:
    """A fresh CA and a serving certificate for loopback, the in-cluster names and `extra_names`."""
    ca = Authority.new("kubesim-ca")
    cert, key = ca.leaf("kube-apiserver", names=DEFAULT_NAMES + extra_names, ips=DEFAULT_IPS)
    return ServingCert(ca.pem, cert, key, ca)
