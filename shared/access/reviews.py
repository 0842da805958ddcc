"""Asking the API server who a token is (TokenReview) and what a user may do (SubjectAccessReview).

Both are the Kubernetes way for a third party: a requester proves who it is with a ServiceAccount token made
for that third party's audience, and the API server, not the third party, says whether the token is good;
RBAC, not the third party, says whether that user may do a thing. The review is always asked as the
requester (user, groups, extra), never as Podherd itself.

A token is a credential: it goes to the API server in a request body and nowhere else (no log line, no
error message, no audit record carries it).
"""

from __future__ import annotations

import base64
import json
from typing import Any

import msgspec

from shared.access.permissions import Identity, Need
from shared.api import paths
from shared.kube.client import KubeClient


class TokenRefused(Exception):
    """The API server does not take the token for this audience; the message is its reason."""


async def review_token(kube: KubeClient, token: str, audience: str) -> Identity:
    body = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": token, "audiences": [audience]},
    }
    answer = msgspec.json.decode(await kube.arequest("POST", paths.TOKEN_REVIEWS, body=body))
    status: dict[str, Any] = answer.get("status") or {}
    if not status.get("authenticated"):
        raise TokenRefused(str(status.get("error") or "the token authenticates no one"))
    # An authenticator that ignores audiences answers none: such a token was made for the API server.
    if audience not in (status.get("audiences") or ()):
        raise TokenRefused(f"the token was not made for the audience {audience!r}")
    user = status.get("user") or {}
    return Identity(
        username=str(user.get("username") or ""),
        uid=str(user.get("uid") or ""),
        groups=tuple(user.get("groups") or ()),
        extra={k: list(v) for k, v in (user.get("extra") or {}).items()},
    )


async def review_access(kube: KubeClient, who: Identity, need: Need) -> tuple[bool, str]:
    """Whether `who` may do `need`, and RBAC's reason (for a refusal: what it was missing)."""
    attributes = {k: v for k, v in msgspec.structs.asdict(need).items() if v}
    spec: dict[str, Any] = {
        "user": who.username,
        "groups": list(who.groups),
        "resourceAttributes": attributes,
    }
    if who.uid:
        spec["uid"] = who.uid
    if who.extra:
        spec["extra"] = who.extra
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
    answer = msgspec.json.decode(await kube.arequest("POST", paths.SUBJECT_ACCESS_REVIEWS, body=body))
    status: dict[str, Any] = answer.get("status") or {}
    reason = str(status.get("reason") or status.get("evaluationError") or "")
    return bool(status.get("allowed")) and not status.get("denied"), reason


def token_expiry(token: str) -> float | None:
    """The `exp` claim of a JWT, read without verifying it (the API server verified the token): a bound on
    how long its review may be reused. None when the token is not a JWT with one."""
    exp = _claims(token).get("exp")
    return float(exp) if isinstance(exp, int | float) else None


def token_subject(token: str) -> str | None:
    """The `sub` claim of one's own ServiceAccount token (`system:serviceaccount:<ns>:<name>`): the username a
    TokenReview of it answers with. Read without verifying it: it is only a sender's own token."""
    sub = _claims(token).get("sub")
    return sub if isinstance(sub, str) and sub else None


def _claims(token: str) -> dict[str, Any]:
    parts = token.split(".")
    if len(parts) != 3:
        return {}
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except ValueError:
        return {}
    return claims if isinstance(claims, dict) else {}
