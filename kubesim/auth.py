"""Who is asking: kubesim's authentication, as kube-apiserver's with a token authenticator and no others.

- The administrator's bearer token is random per kubesim and only in the kubeconfig kubesim writes
  (user `kubernetes-admin`, group `system:masters`).
- A ServiceAccount token exists only when kubesim issued it (TokenRequest, as the kubelet's projected
  token is): random, bound to the ServiceAccount's uid, and valid until it expires or the account goes.
- A request without credentials is `system:anonymous` (group `system:unauthenticated`); a token kubesim did
  not issue, a hand-made one included, is `401 Unauthorized`.
- `Impersonate-User` / `Impersonate-Group` make a request another user's, if the requester may
  `impersonate` them (the administrator may).
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kubesim.errors import ApiError, FieldError, invalid_fields
from kubesim.records import now_iso

if TYPE_CHECKING:
    from collections.abc import Mapping

    from kubesim.store import Store

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


@dataclass(frozen=True)
class _Issued:
    namespace: str
    name: str
    uid: str
    expires: float


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


@dataclass
class Authenticator:
    store: Store
    admin_token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    _issued: dict[str, _Issued] = field(default_factory=dict)

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
        issued = self._issued.get(token)
        if issued is None or issued.expires < time.time():
            raise unauthorized()
        rt = self.store.registry.get("", "v1", "serviceaccounts")
        account = self.store.find(rt, issued.namespace, issued.name) if rt else None
        if account is None or account["metadata"].get("uid") != issued.uid:
            raise unauthorized()  # a bound token dies with its ServiceAccount
        return service_account_user(issued.namespace, issued.name, issued.uid)

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
        token = secrets.token_urlsafe(32)
        expires = time.time() + seconds
        self._issued[token] = _Issued(namespace, name, account["metadata"]["uid"], expires)
        return {
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": now_iso()},
            "spec": spec,
            "status": {"token": token, "expirationTimestamp": now_iso(expires)},
        }


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
    if not groups:
        return user_named(name, [])
    return user_named(name, groups if AUTHENTICATED in groups else [*groups, AUTHENTICATED])


def user_named(name: str, groups: list[str], uid: str = "") -> User:
    """The user a name stands for: a ServiceAccount named without groups gets the groups it always has."""
    account = User(name).service_account
    if account is not None and not groups:
        return service_account_user(*account, uid)
    return User(name, tuple(groups), uid)
