"""Authorization as kube-apiserver's RBAC authorizer decides it, always on.

`system:masters` may do anything. Everyone else is allowed only what the rules of the (Cluster)Roles bound
to them (as a ServiceAccount, a User or one of their Groups) grant, plus the API server's bootstrap policy:
anyone may read `/healthz`, `/livez`, `/readyz` and `/version` (system:public-info-viewer); an
authenticated user may also read discovery and OpenAPI (system:discovery) and create the self access and
rules reviews (system:basic-user). Denials answer 403 Forbidden in the API server's words and are kept,
so a test can assert that a service never needed more than its role.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kubesim.apiserver.auth import AUTHENTICATED, User
from kubesim.apiserver.errors import ApiError

if TYPE_CHECKING:
    from kubesim.apiserver.store import Store

PUBLIC_PATHS = ("/healthz", "/livez", "/readyz", "/version")
DISCOVERY_PATHS = ("/api", "/apis", "/openapi")
SELF_REVIEWS = (
    ("authorization.k8s.io", "selfsubjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectrulesreviews"),
    ("authentication.k8s.io", "selfsubjectreviews"),
)


@dataclass(frozen=True)
class Attributes:
    """What a request does (`authorizer.Attributes`): a resource request or a path."""

    verb: str
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str | None = None
    name: str | None = None
    path: str = ""

    @property
    def resource_request(self) -> bool:
        return not self.path

    @property
    def full_resource(self) -> str:
        return self.resource + (f"/{self.subresource}" if self.subresource else "")


@dataclass(frozen=True)
class Denial:
    user: str
    verb: str
    group: str
    resource: str
    namespace: str | None
    name: str | None


def _matches(values: Iterable[str], wanted: str) -> bool:
    return any(v in ("*", wanted) for v in values)


def rule_allows(rule: dict[str, Any], attrs: Attributes) -> bool:
    """One PolicyRule: its apiGroups, resources (`pods/eviction`, `*`), verbs and resourceNames."""
    if not _matches(rule.get("verbs") or [], attrs.verb):
        return False
    if not _matches(rule.get("apiGroups") or [], attrs.group):
        return False
    if not _matches(rule.get("resources") or [], attrs.full_resource):
        return False
    names = rule.get("resourceNames") or []
    return not names or (attrs.name is not None and attrs.name in names)


class Authorizer:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.denials: list[Denial] = []
        # What each ServiceAccount was allowed: (user, verb, group, resource), for least-privilege checks.
        self.used: set[tuple[str, str, str, str]] = set()
        # The roles bound to a user in a namespace, as of the RBAC objects' `changes` in `_policy_at` (the
        # API server's authorizer reads them from informer caches, not on every request either).
        self._bound: dict[tuple[User, str | None], list[tuple[Any, str]]] = {}
        self._policy_at: tuple[int, ...] = ()

    def check(self, user: User, attrs: Attributes) -> None:
        """Allow, or raise the API server's 403 (and remember the denial)."""
        allowed, _ = self.decide(user, attrs)
        if allowed:
            if user.service_account is not None and attrs.resource_request:
                self.used.add((user.name, attrs.verb, attrs.group, attrs.full_resource))
            return
        self.denials.append(
            Denial(user.name, attrs.verb, attrs.group, attrs.full_resource, attrs.namespace, attrs.name)
        )
        raise forbidden(user, attrs)

    def decide(self, user: User, attrs: Attributes) -> tuple[bool, str]:
        """(allowed, the RBAC reason), as a SubjectAccessReview answers."""
        if user.admin:
            return True, ""
        if not attrs.resource_request:
            return _bootstrap_path(user, attrs), ""
        if _basic_user(user, attrs):
            return True, BASIC_USER_REASON
        for role, reason in self._bound_roles(user, attrs.namespace):
            if any(rule_allows(r, attrs) for r in role.get("rules") or []):
                return True, reason
        return False, ""

    def rules(self, user: User, namespace: str) -> list[dict[str, Any]]:
        """Every rule that applies to `user` in `namespace` (a SelfSubjectRulesReview's resourceRules)."""
        if user.admin:
            return [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]
        found = []
        if AUTHENTICATED in user.groups:
            for group, resource in SELF_REVIEWS:
                found.append({"verbs": ["create"], "apiGroups": [group], "resources": [resource]})
        for role, _ in self._bound_roles(user, namespace):
            found.extend(r for r in role.get("rules") or [] if r.get("resources"))
        return found

    def _bound_roles(self, user: User, namespace: str | None) -> list[tuple[Any, str]]:
        registry = self.store.registry
        policy_at = tuple(self.store.bucket(_rt(registry, plural)).changes for plural in RBAC_PLURALS)
        if policy_at != self._policy_at:
            self._bound.clear()
            self._policy_at = policy_at
        key = (user, namespace)
        bound = self._bound.get(key)
        if bound is None:
            bound = self._bound[key] = list(self._roles_of(user, namespace))
        return bound

    def _roles_of(self, user: User, namespace: str | None) -> Iterator[tuple[Any, str]]:
        """Each role bound to `user` (cluster-wide, or in `namespace`), with the RBAC reason naming it."""
        registry = self.store.registry
        bindings: list[tuple[Any, str | None]] = [
            (b, None) for b in self.store.objects(_rt(registry, "clusterrolebindings"))
        ]
        if namespace:
            bindings += [(b, namespace) for b in self.store.objects(_rt(registry, "rolebindings"), namespace)]
        for binding, scope in bindings:
            subject = next((s for s in binding.get("subjects") or [] if _is(user, s, scope)), None)
            if subject is None:
                continue
            ref = binding.get("roleRef") or {}
            cluster_role = ref.get("kind") == "ClusterRole"
            role_rt = _rt(registry, "clusterroles" if cluster_role else "roles")
            role = self.store.find(role_rt, "" if cluster_role else scope or "", str(ref.get("name", "")))
            if role is None:
                continue
            kind = "RoleBinding" if scope else "ClusterRoleBinding"
            where = f' of namespace "{scope}"' if scope else ""
            yield (
                role,
                (
                    f'RBAC: allowed by {kind} "{binding["metadata"]["name"]}"{where} of {ref.get("kind")}'
                    f' "{ref.get("name")}" to {_subject_text(subject)}'
                ),
            )


RBAC_PLURALS = ("clusterrolebindings", "rolebindings", "clusterroles", "roles")

BASIC_USER_REASON = (
    'RBAC: allowed by ClusterRoleBinding "system:basic-user" of ClusterRole "system:basic-user"'
)


def _basic_user(user: User, attrs: Attributes) -> bool:
    """system:basic-user: an authenticated user may review its own access."""
    return (
        AUTHENTICATED in user.groups
        and (attrs.group, attrs.resource) in SELF_REVIEWS
        and attrs.verb == "create"
    )


def _is(user: User, subject: dict[str, Any], scope: str | None) -> bool:
    kind = subject.get("kind")
    if kind == "ServiceAccount":
        account = user.service_account
        return account == (subject.get("namespace", scope), subject.get("name"))
    if kind == "User":
        return bool(subject.get("name") == user.name)
    if kind == "Group":
        return subject.get("name") in user.groups
    return False


def _subject_text(subject: dict[str, Any]) -> str:
    if subject.get("kind") == "ServiceAccount":
        return f'ServiceAccount "{subject.get("name")}/{subject.get("namespace")}"'
    return f'{subject.get("kind")} "{subject.get("name")}"'


def _bootstrap_path(user: User, attrs: Attributes) -> bool:
    if attrs.verb != "get":
        return False
    path = attrs.path.rstrip("/") or "/"
    if path in PUBLIC_PATHS or path.startswith("/version/"):
        return True
    return AUTHENTICATED in user.groups and any(
        path == p or path.startswith(p + "/") for p in DISCOVERY_PATHS
    )


def review_attributes(spec: dict[str, Any]) -> Attributes:
    """The attributes an access review asks about (`resourceAttributes` or `nonResourceAttributes`)."""
    if spec.get("nonResourceAttributes"):
        path_attrs = spec["nonResourceAttributes"]
        return Attributes(str(path_attrs.get("verb") or ""), path=str(path_attrs.get("path") or ""))
    res = spec.get("resourceAttributes") or {}
    return Attributes(
        str(res.get("verb") or ""),
        str(res.get("group") or ""),
        str(res.get("resource") or ""),
        str(res.get("subresource") or ""),
        res.get("namespace") or None,
        res.get("name") or None,
    )


def forbidden(user: User, attrs: Attributes) -> ApiError:
    if not attrs.resource_request:
        return ApiError(
            403,
            "Forbidden",
            f'forbidden: User "{user.name}" cannot {attrs.verb} path "{attrs.path}"',
            details={},
        )
    qualified = f"{attrs.resource}.{attrs.group}" if attrs.group else attrs.resource
    named = f' "{attrs.name}"' if attrs.name else ""
    where = f' in the namespace "{attrs.namespace}"' if attrs.namespace else " at the cluster scope"
    return ApiError(
        403,
        "Forbidden",
        f'{qualified}{named} is forbidden: User "{user.name}" cannot {attrs.verb} resource'
        f' "{attrs.full_resource}" in API group "{attrs.group}"{where}',
        details={
            "group": attrs.group,
            "kind": attrs.resource,
            **({"name": attrs.name} if attrs.name else {}),
        },
    )


def _rt(registry: Any, plural: str) -> Any:
    rt = registry.get("rbac.authorization.k8s.io", "v1", plural)
    assert rt is not None
    return rt
