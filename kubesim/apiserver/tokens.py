"""ServiceAccount tokens as kube-apiserver issues them: compact JWTs whose claims say who, for whom and until
when (`iss`, `sub`, `aud`, `exp`, `iat`, `nbf`, `jti` and the `kubernetes.io` claim naming the account and
the object the token is bound to).

A real API server signs them with its service-account key (RS256/ES256); kubesim signs them with an HMAC
key of its own, random per kubesim. Nothing outside kubesim verifies the signature: a third party asks the
API server (TokenReview), as it must with a real cluster. Readers that only want the expiry (a cache
bounded by the token's life) may read `exp` unverified, as the claims are public.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import uuid
from dataclasses import dataclass
from typing import Any

ISSUER = "https://kubernetes.default.svc.cluster.local"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class Claims:
    namespace: str
    name: str
    uid: str
    audiences: tuple[str, ...]
    issued: int
    expires: int
    jti: str
    bound: dict[str, str] | None = None  # the object the token is bound to (a Pod), if any


class Signer:
    def __init__(self) -> None:
        self._key = secrets.token_bytes(32)

    def issue(self, claims: Claims) -> str:
        account = {"name": claims.name, "uid": claims.uid}
        kube: dict[str, Any] = {"namespace": claims.namespace, "serviceaccount": account}
        if claims.bound is not None:
            kube[claims.bound["kind"].lower()] = {"name": claims.bound["name"], "uid": claims.bound["uid"]}
        body = {
            "aud": list(claims.audiences),
            "exp": claims.expires,
            "iat": claims.issued,
            "nbf": claims.issued,
            "iss": ISSUER,
            "jti": claims.jti,
            "kubernetes.io": kube,
            "sub": f"system:serviceaccount:{claims.namespace}:{claims.name}",
        }
        head = _b64(json.dumps({"alg": "HS256", "kid": "kubesim", "typ": "JWT"}).encode())
        payload = _b64(json.dumps(body, separators=(",", ":")).encode())
        return f"{head}.{payload}.{self._sign(f'{head}.{payload}')}"

    def verify(self, token: str) -> Claims | None:
        """The claims of a token this signer issued (whatever its expiry), else None."""
        parts = token.split(".")
        if len(parts) != 3 or not hmac.compare_digest(parts[2], self._sign(f"{parts[0]}.{parts[1]}")):
            return None
        body = json.loads(_unb64(parts[1]))
        kube = body["kubernetes.io"]
        bound = next(
            ({"kind": kind.capitalize(), **kube[kind]} for kind in ("pod", "secret", "node") if kind in kube),
            None,
        )
        return Claims(
            namespace=kube["namespace"],
            name=kube["serviceaccount"]["name"],
            uid=kube["serviceaccount"]["uid"],
            audiences=tuple(body["aud"]),
            issued=int(body["iat"]),
            expires=int(body["exp"]),
            jti=body["jti"],
            bound=bound,
        )

    def _sign(self, text: str) -> str:
        return _b64(hmac.new(self._key, text.encode(), hashlib.sha256).digest())


def new_jti() -> str:
    return str(uuid.uuid4())
