"""Who a request is from and what they may do: authentication, impersonation (itself authorized), and the
access reviews (`kubectl auth can-i`) answered from RBAC.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from kubesim.apiserver.auth import AUTHENTICATED, Authenticator, User, impersonated, user_named
from kubesim.apiserver.http_common import Target
from kubesim.apiserver.rbac import Attributes, Authorizer, review_attributes


def certificate_user(request: web.Request) -> User | None:
    """The user of a verified client certificate: its CN the name, its Os the groups, as the API server's
    x509 authenticator converts them (`CommonNameUserConversion`)."""
    transport = request.transport
    peer = transport.get_extra_info("peercert") if transport is not None else None
    if not peer:
        return None
    fields = [(k, v) for rdn in peer.get("subject", ()) for k, v in rdn]
    name = next((v for k, v in fields if k == "commonName"), "")
    if not name:
        return None
    groups = [v for k, v in fields if k == "organizationName"]
    return User(name, (*groups, AUTHENTICATED))


class Access:
    def __init__(self, auth: Authenticator, authorizer: Authorizer) -> None:
        self.auth = auth
        self.authorizer = authorizer

    def user(self, request: web.Request) -> User:
        """Who is asking: authenticated (a client certificate first, as kube-apiserver's x509 authenticator
        comes before its token authenticators), then (if asked and allowed) impersonated."""
        user = certificate_user(request) or self.auth.authenticate(request.headers)
        as_user = impersonated(request.headers, request.headers.getall("Impersonate-Group", []))
        if as_user is None:
            return user
        account = as_user.service_account
        if account is not None:
            self.authorizer.check(
                user, Attributes("impersonate", "", "serviceaccounts", "", account[0], account[1])
            )
        else:
            self.authorizer.check(user, Attributes("impersonate", "", "users", "", None, as_user.name))
        for group in request.headers.getall("Impersonate-Group", []):
            self.authorizer.check(user, Attributes("impersonate", "", "groups", "", None, group))
        return as_user

    def answer(self, user: User, target: Target, body: dict[str, Any]) -> dict[str, Any]:
        """A review of the authentication and authorization groups: who a token is (TokenReview), who is
        asking (SelfSubjectReview, `kubectl auth whoami`), or what someone may do (the access reviews)."""
        if target.rt.kind == "TokenReview":
            return self.auth.review(body)
        if target.rt.kind == "SelfSubjectReview":
            info = {
                "username": user.name,
                "groups": list(user.groups),
                **({"uid": user.uid} if user.uid else {}),
            }
            body = {"kind": "SelfSubjectReview", "apiVersion": "authentication.k8s.io/v1", "metadata": {}}
            return {**body, "status": {"userInfo": info}}
        return self.review(user, target, body)

    def review(self, user: User, target: Target, body: dict[str, Any]) -> dict[str, Any]:
        """SelfSubjectAccessReview, SubjectAccessReview and SelfSubjectRulesReview, answered from RBAC."""
        spec = dict(body.get("spec") or {})
        kind = target.rt.kind
        if kind == "SelfSubjectRulesReview":
            namespace = str(spec.get("namespace") or "")
            rules = self.authorizer.rules(user, namespace)
            status: dict[str, Any] = {"resourceRules": rules, "nonResourceRules": [], "incomplete": False}
        else:
            subject = user
            if kind in ("SubjectAccessReview", "LocalSubjectAccessReview"):
                subject = user_named(
                    str(spec.get("user") or ""), list(spec.get("groups") or ()), str(spec.get("uid") or "")
                )
            allowed, reason = self.authorizer.decide(subject, review_attributes(spec))
            status = {"allowed": allowed, **({"reason": reason} if reason else {})}
        return {
            "kind": kind,
            "apiVersion": "authorization.k8s.io/v1",
            "metadata": {"creationTimestamp": None},
            "spec": spec,
            "status": status,
        }
