"""RBAC as the API server enforces it, for the ServiceAccounts kubesim hands out tokens to.

A bearer token `serviceaccount:<namespace>:<name>` authenticates as that ServiceAccount, whose requests are
allowed only by the rules of the (Cluster)Roles its (Cluster)RoleBindings grant. Any other request (no
token, or another token, as kubectl and the tests use) is an administrator's. Denials answer 403 Forbidden
with the API server's message and are kept, so a test can assert that a service never needed more than its
role.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kubesim.errors import ApiError

if TYPE_CHECKING:
    from aiohttp import web

    from kubesim.server import Target
    from kubesim.store import Store

TOKEN_PREFIX = "serviceaccount:"


def token_for(namespace: str, name: str) -> str:
    return f"{TOKEN_PREFIX}{namespace}:{name}"


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


def rule_allows(rule: dict[str, Any], verb: str, group: str, resource: str, name: str | None) -> bool:
    """One PolicyRule: its apiGroups, resources (`pods/eviction`, `*`), verbs and resourceNames."""
    if not _matches(rule.get("verbs") or [], verb):
        return False
    if not _matches(rule.get("apiGroups") or [], group):
        return False
    if not _matches(rule.get("resources") or [], resource):
        return False
    names = rule.get("resourceNames") or []
    return not names or (name is not None and name in names)


class Authorizer:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.denials: list[Denial] = []
        # What each ServiceAccount was allowed: (user, verb, group, resource), for least-privilege checks.
        self.used: set[tuple[str, str, str, str]] = set()

    def __call__(self, request: web.Request, verb: str, target: Target) -> None:
        header = request.headers.get("Authorization", "")
        token = header.removeprefix("Bearer ").strip()
        if not token.startswith(TOKEN_PREFIX):
            return
        sa_namespace, _, sa_name = token[len(TOKEN_PREFIX) :].partition(":")
        rt = target.rt
        resource = rt.plural + (f"/{target.subresource}" if target.subresource else "")
        user = f"system:serviceaccount:{sa_namespace}:{sa_name}"
        if self._allowed(sa_namespace, sa_name, verb, rt.group, resource, target.namespace, target.name):
            self.used.add((user, verb, rt.group, resource))
            return
        self.denials.append(Denial(user, verb, rt.group, resource, target.namespace, target.name))
        where = f' in the namespace "{target.namespace}"' if target.namespace else " at the cluster scope"
        named = f' "{target.name}"' if target.name else ""
        raise ApiError(
            403,
            "Forbidden",
            f'{resource}{named} is forbidden: User "{user}" cannot {verb} resource "{resource}" '
            f'in API group "{rt.group}"{where}',
            {"group": rt.group, "kind": resource, **({"name": target.name} if target.name else {})},
        )

    def _allowed(
        self,
        sa_namespace: str,
        sa_name: str,
        verb: str,
        group: str,
        resource: str,
        namespace: str | None,
        name: str | None,
    ) -> bool:
        registry = self.store.registry
        bindings = [(b, None) for b in self.store.objects(_rt(registry, "clusterrolebindings"))] + [
            (b, b["metadata"].get("namespace"))
            for b in self.store.objects(_rt(registry, "rolebindings"), namespace)
            if namespace is not None
        ]
        for binding, scope in bindings:
            if not any(
                s.get("kind") == "ServiceAccount"
                and s.get("name") == sa_name
                and s.get("namespace", scope) == sa_namespace
                for s in binding.get("subjects") or []
            ):
                continue
            ref = binding.get("roleRef") or {}
            kind = "clusterroles" if ref.get("kind") == "ClusterRole" else "roles"
            role = self.store.find(_rt(registry, kind), scope or "", str(ref.get("name", "")))
            if role is not None and any(
                rule_allows(r, verb, group, resource, name) for r in role.get("rules") or []
            ):
                return True
        return False


def _rt(registry: Any, plural: str) -> Any:
    rt = registry.get("rbac.authorization.k8s.io", "v1", plural)
    assert rt is not None
    return rt
