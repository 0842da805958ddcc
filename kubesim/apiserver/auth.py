"""Who is asking: kubesim's authentication, as kube-apiserver's with a token authenticator and no others.

- The administrator's bearer token is random per kubesim and only in the kubeconfig kubesim writes
  (user `kubernetes-admin`, group `system:masters`).
- A ServiceAccount token exists only when kubesim issued it (TokenRequest, as the kubelet's projected
  token is): a signed JWT (`kubesim.apiserver.tokens`) for its audiences, bound to the ServiceAccount's uid
  (and to the pod it was requested for), valid until it expires or the account (or the pod) goes.
- The API server takes a token only when the API server is among its audiences: a token made for a third
  party (`--audience podherd`) is `401` here, and the third party proves it with a TokenReview naming its
  own audience, as kube-apiserver answers it.
- A request without credentials is `system:anonymous` (group `system:unauthenticated`); a token kubesim did
  not issue, a hand-made one included, is `401 Unauthorized`.
- `Impersonate-User` / `Impersonate-Group` make a request another user's, if the requester may
  `impersonate` them (the administrator may).
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kubesim.apiserver.errors import ApiError, FieldError, invalid_fields
from kubesim.apiserver.records import now_iso
from kubesim.apiserver.tokens import Claims, Signer, new_jti

if TYPE_CHECKING:
    from collections.abc import Mapping

    from kubesim.apiserver.store import Store

ADMIN = "kubernetes-admin"
MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"
SA_PREFIX = "system:serviceaccount:"
DEFAULT_AUDIENCE = "https://kubernetes.default.svc.cluster.local"
MIN_EXPIRATION, DEFAULT_EXPIRATION = 600, 3600


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""

    @property
    def admin(self) -> bool:
        return MASTERS in self.groups

    @property
    def service_account(self) -> tuple[str, str] | None:
        """(namespace, name) when the user is a ServiceAccount."""
        if not self.name.startswith(SA_PREFIX):
            return None
        namespace, _, name = self.name[len(SA_PREFIX) :].partition(":")
        return namespace, name


ANONYMOUS = User("system:anonymous", ("system:unauthenticated",))


def service_account_user(namespace: str, name: str, uid: str = "") -> User:
    groups = ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", AUTHENTICATED)
    return User(f"{SA_PREFIX}{namespace}:{name}", groups, uid)


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


class TokenInvalid(Exception):
    """Why a ServiceAccount token authenticates no one, in the API server's words."""


@dataclass
class Authenticator:
    store: Store
    admin_token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    signer: Signer = field(default_factory=Signer)
    clock: Callable[[], float] = time.time  # tests may move it on to see a token expire

    def authenticate(self, headers: Mapping[str, str]) -> User:
        header = headers.get("Authorization", "")
        if not header:
            return ANONYMOUS
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise unauthorized()
        token = token.strip()
        if secrets.compare_digest(token, self.admin_token):
            return User(ADMIN, (MASTERS, AUTHENTICATED))
        try:
            return self._account_user(token, (DEFAULT_AUDIENCE,))[0]
        except TokenInvalid:
            raise unauthorized() from None

    def _account_user(self, token: str, audiences: tuple[str, ...]) -> tuple[User, Claims]:
        claims = self.signer.verify(token)
        if claims is None:
            raise TokenInvalid("token lookup failed")
        if not set(claims.audiences) & set(audiences):
            raise TokenInvalid(
                f"token audiences {_quoted(claims.audiences)} is invalid for the target audiences "
                f"{_quoted(audiences)}"
            )
        if claims.expires < self.clock():
            raise TokenInvalid("service account token has expired")
        account = self._find("serviceaccounts", claims.namespace, claims.name)
        if account is None:
            raise TokenInvalid("service account token has been invalidated")
        if account["metadata"].get("uid") != claims.uid:
            raise TokenInvalid(
                f"service account UID ({account['metadata'].get('uid')}) does not match claim ({claims.uid})"
            )
        if claims.bound is not None and claims.bound["kind"] == "Pod":
            pod = self._find("pods", claims.namespace, claims.bound["name"])
            if pod is None or pod["metadata"].get("uid") != claims.bound["uid"]:
                raise TokenInvalid(f"pod {claims.bound['name']} has been deleted or recreated")
        return service_account_user(claims.namespace, claims.name, claims.uid), claims

    def _find(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        rt = self.store.registry.get("", "v1", plural)
        return self.store.find(rt, namespace, name) if rt else None

    def review(self, body: dict[str, Any]) -> dict[str, Any]:
        """A TokenReview (authentication.k8s.io/v1): who a token is, for the audiences asked (by default the
        API server's own), as kube-apiserver's ServiceAccount token authenticator answers it."""
        spec = dict(body.get("spec") or {})
        asked = tuple(spec.get("audiences") or ()) or (DEFAULT_AUDIENCE,)
        token = str(spec.get("token") or "")
        status: dict[str, Any] = {"user": {}}
        if secrets.compare_digest(token, self.admin_token) and DEFAULT_AUDIENCE in asked:
            info = {"username": ADMIN, "groups": [MASTERS, AUTHENTICATED]}
            status = {"authenticated": True, "user": info, "audiences": [DEFAULT_AUDIENCE]}
        else:
            try:
                user, claims = self._account_user(token, asked)
            except TokenInvalid as exc:
                status["error"] = f"[invalid bearer token, {exc}]"
            else:
                status = {
                    "authenticated": True,
                    "user": {**user_info(user), "extra": _extra(claims)},
                    "audiences": [a for a in claims.audiences if a in asked],
                }
        return {
            "kind": "TokenReview",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"creationTimestamp": None},
            "spec": spec,
            "status": status,
        }

    def request_token(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """The `token` subresource of a ServiceAccount: a TokenRequest answered with a fresh token."""
        rt = self.store.registry.get("", "v1", "serviceaccounts")
        assert rt is not None
        account = self.store.get(rt, namespace, name)
        spec = dict(body.get("spec") or {})
        seconds = int(spec.get("expirationSeconds") or DEFAULT_EXPIRATION)
        if seconds < MIN_EXPIRATION:
            error = FieldError(
                "FieldValueInvalid",
                "spec.expirationSeconds",
                seconds,
                "may not specify a duration less than 10 minutes",
            )
            raise invalid_fields("TokenRequest", "authentication.k8s.io", name, errors=[error])
        spec.update(expirationSeconds=seconds, audiences=spec.get("audiences") or [DEFAULT_AUDIENCE])
        spec.setdefault("boundObjectRef", None)
        now = int(self.clock())
        bound = spec["boundObjectRef"]
        claims = Claims(
            namespace=namespace,
            name=name,
            uid=account["metadata"]["uid"],
            audiences=tuple(spec["audiences"]),
            issued=now,
            expires=now + seconds,
            jti=new_jti(),
            bound={k: str(bound[k]) for k in ("kind", "name", "uid")} if bound else None,
        )
        return {
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": now_iso()},
            "spec": spec,
            "status": {"token": self.signer.issue(claims), "expirationTimestamp": now_iso(claims.expires)},
        }


def user_info(user: User) -> dict[str, Any]:
    return {"username": user.name, "uid": user.uid, "groups": list(user.groups)}


def _extra(claims: Claims) -> dict[str, list[str]]:
    """The `extra` of a ServiceAccount token's user: its credential id, and the pod it is bound to."""
    extra = {"authentication.kubernetes.io/credential-id": [f"JTI={claims.jti}"]}
    if claims.bound is not None and claims.bound["kind"] == "Pod":
        extra["authentication.kubernetes.io/pod-name"] = [claims.bound["name"]]
        extra["authentication.kubernetes.io/pod-uid"] = [claims.bound["uid"]]
    return extra


def _quoted(values: tuple[str, ...]) -> str:
    """A Go `%q` of a string slice: `["a" "b"]`."""
    return "[" + " ".join(json.dumps(v) for v in values) + "]"


def impersonated(headers: Mapping[str, str], groups: list[str]) -> User | None:
    """The user a request asks to act as (`Impersonate-User`, `Impersonate-Group`), or None."""
    name = headers.get("Impersonate-User")
    if not name:
        if groups:
            raise ApiError(
                400,
                "BadRequest",
                "requested [{Kind:Group Name:" + groups[0] + "}] without impersonating a user",
            )
        return None
    if name == ANONYMOUS.name:
        unauthenticated = ANONYMOUS.groups[0]
        return User(name, tuple(groups if unauthenticated in groups else [*groups, unauthenticated]))
    if not groups and User(name).service_account is not None:
        return user_named(name, [])  # a ServiceAccount's groups, which always include system:authenticated
    # As the impersonation filter does: system:authenticated added unless a group says either way.
    said = AUTHENTICATED in groups or ANONYMOUS.groups[0] in groups
    return user_named(name, groups if said else [*groups, AUTHENTICATED])


def user_named(name: str, groups: list[str], uid: str = "") -> User:
    """The user a name stands for: a ServiceAccount named without groups gets the groups it always has."""
    account = User(name).service_account
    if account is not None and not groups:
        return service_account_user(*account, uid)
    return User(name, tuple(groups), uid)
