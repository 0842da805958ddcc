"""A minimal OpenAPI v3 surface: enough for kubectl to learn that the server validates fields itself, and
each custom resource's schema from its CRD (`kubectl explain`).

kubectl (1.27+) asks `/openapi/v3` which query parameters each kind's PATCH accepts; finding
`fieldValidation` and `dryRun` there, it leaves validation to the server instead of downloading schemas.
Schemas are published as open objects tagged with their group/version/kind.
"""

from __future__ import annotations

import hashlib
from typing import Any

from kubesim.apiserver import builtin_openapi
from kubesim.apiserver.resources import Registry, ResourceType

PARAMS = [
    {"name": name, "in": "query", "schema": {"type": "string"}}
    for name in ("dryRun", "fieldManager", "fieldValidation", "force", "pretty")
]


def _gv_path(group: str, version: str) -> str:
    return f"api/{version}" if not group else f"apis/{group}/{version}"


def index(registry: Registry) -> dict[str, Any]:
    paths = {}
    for group, version in sorted({(rt.group, rt.version) for rt in registry.all()}):
        path = _gv_path(group, version)
        digest = (
            hashlib.sha256(repr(sorted(_names(registry, group, version))).encode()).hexdigest()[:16].upper()
        )
        paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={digest}"}
    return {"paths": paths}


def _names(registry: Registry, group: str, version: str) -> list[str]:
    return [rt.plural for rt in registry.all() if rt.group == group and rt.version == version]


def document(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    types = [rt for rt in registry.all() if rt.group == group and rt.version == version]
    if not types:
        return None
    if not any(rt.crd for rt in types) and (real := builtin_openapi.document(group, version)) is not None:
        return real  # the API server's own document: the real schemas, with their descriptions
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    for rt in types:
        gvk = {"group": rt.group, "version": rt.version, "kind": rt.kind}
        base = "/" + _gv_path(group, version)
        item = (
            f"{base}/namespaces/{{namespace}}/{rt.plural}/{{name}}"
            if rt.namespaced
            else f"{base}/{rt.plural}/{{name}}"
        )
        operation = {
            "x-kubernetes-group-version-kind": gvk,
            "parameters": PARAMS,
            "responses": {"200": {"description": "OK"}},
        }
        paths[item] = {"get": operation, "put": operation, "patch": operation, "delete": operation}
        if rt.schema is not None:  # a custom resource: its CRD's schema, which `kubectl explain` reads
            schemas[_schema_name(rt)] = {**rt.schema.schema, "x-kubernetes-group-version-kind": [gvk]}
        else:
            schemas[_schema_name(rt)] = {
                "type": "object",
                "x-kubernetes-group-version-kind": [gvk],
                "x-kubernetes-preserve-unknown-fields": True,
            }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (kubesim)", "version": "v1.32.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }


def _schema_name(rt: ResourceType) -> str:
    group = ".".join(reversed(rt.group.split("."))) if rt.group else "core"
    if rt.crd:
        return f"{group}.{rt.version}.{rt.kind}"
    return f"io.k8s.api.{group}.{rt.version}.{rt.kind}"
