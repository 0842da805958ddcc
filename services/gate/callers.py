"""Who called the gate: the API server, proven by the client certificate kube-apiserver presents to
webhooks when its AdmissionConfiguration names a kubeConfigFile (verified against `gate.clientCA`, and
carrying one of `gate.clientNames` as its CN or a DNS name), or a caller the gate cannot tell from anyone
who reaches its port. A review is only the caller's word for what the API server asks; one that would have
the gate write (start a job for an eviction, mark a pod) is taken from an unverified caller only with
`gate.unverifiedCallers: allow`."""

from __future__ import annotations

from typing import Any

import msgspec

from shared.config.model import GateConfig


class Caller(msgspec.Struct, frozen=True):
    verified: bool
    name: str = ""


class Callers:
    def __init__(self, config: GateConfig) -> None:
        self.names = frozenset(config.client_names) if config.client_ca else frozenset()
        self.trust_unverified = config.unverified_callers == "allow"

    def of(self, peercert: dict[str, Any] | None) -> Caller:
        """`peercert`: the client certificate the TLS handshake verified (None: none was presented)."""
        names = _names(peercert or {})
        found = next((n for n in names if n in self.names), "")
        return Caller(verified=bool(found), name=found or (names[0] if names else ""))

    def may_write(self, caller: Caller) -> bool:
        return caller.verified or self.trust_unverified


def _names(cert: dict[str, Any]) -> list[str]:
    common = [value for rdn in cert.get("subject") or () for key, value in rdn if key == "commonName"]
    dns = [value for kind, value in cert.get("subjectAltName") or () if kind == "DNS"]
    return [*common, *dns]


def unverified_refusal(caller: Caller) -> str:
    who = (
        f"a certificate for {caller.name!r}, not one of gate.clientNames" if caller.name else "no certificate"
    )
    return (
        f"the gate could not verify that this review came from the API server ({who} of gate.clientCA), "
        "so it starts no job for this eviction: give kube-apiserver the gate's client certificate (its "
        "AdmissionConfiguration), or set gate.unverifiedCallers: allow where a NetworkPolicy keeps all but "
        "the API server off the gate's port"
    )
