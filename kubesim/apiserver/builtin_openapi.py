"""Kubernetes 1.32's own OpenAPI v3 documents for the built-in group-versions kubesim serves (the API
server's `/openapi/v3/...`, kept as data in `openapi_v3/`, read once per process): what `/openapi/v3`
serves (so `kubectl explain pods.spec` reads the real schema), and each kind's schema with its `$ref`s
resolved, by which a write of a built-in object is decoded as the API server's decoder does (a field the
type does not have is dropped, and reported as the request's `fieldValidation` says) and a strategic merge
patch merges the lists its type says to merge, by their merge keys.
"""

from __future__ import annotations

import functools
import gzip
import json
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "openapi_v3"
PATCH_STRATEGY, PATCH_MERGE_KEY = "x-kubernetes-patch-strategy", "x-kubernetes-patch-merge-key"
PATCH_KEYS = (PATCH_STRATEGY, PATCH_MERGE_KEY)
LIST_KEYS = ("x-kubernetes-list-type", "x-kubernetes-list-map-keys", "x-kubernetes-map-type")
TYPE_KEYS = ("type", "format", "x-kubernetes-int-or-string")
GO_TYPE = "x-kubesim-go-type"  # a named type's Go name, as a decoding error prints it (`v1.PodSpec`)
REF = "#/components/schemas/"
# Types the decoder keeps whole (json.RawMessage-like): no properties to prune by.
OPAQUE = frozenset(
    {
        "io.k8s.apimachinery.pkg.runtime.RawExtension",
        "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1",
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON",
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps",
    }
)


def _file(group: str, version: str) -> Path:
    return DATA / (f"api_{version}.json.gz" if not group else f"apis_{group}_{version}.json.gz")


@functools.cache
def document(group: str, version: str) -> dict[str, Any] | None:
    """The API server's OpenAPI v3 document for a built-in group-version; None for one kubesim has not."""
    path = _file(group, version)
    if not path.exists():
        return None
    loaded: dict[str, Any] = json.loads(gzip.decompress(path.read_bytes()))
    return loaded


@functools.cache
def encoded(group: str, version: str) -> bytes | None:
    found = document(group, version)
    return None if found is None else json.dumps(found, separators=(",", ":")).encode()


@functools.cache
def schema_of(group: str, version: str, kind: str) -> dict[str, Any] | None:
    """The kind's schema, `$ref`s resolved (shared where they repeat), for pruning; None if unknown."""
    doc = document(group, version)
    if doc is None:
        return None
    components = doc["components"]["schemas"]
    for name, schema in components.items():
        for gvk in schema.get("x-kubernetes-group-version-kind") or []:
            if (gvk.get("group"), gvk.get("version"), gvk.get("kind")) == (group, version, kind):
                return _Resolver(components).named(name)
    return None


class _Resolver:
    def __init__(self, components: dict[str, Any]) -> None:
        self.components = components
        self.done: dict[str, dict[str, Any]] = {}

    def named(self, name: str) -> dict[str, Any]:
        if name in self.done:
            return self.done[name]
        resolved: dict[str, Any] = {}
        self.done[name] = resolved  # before its fields: a type that contains itself ends here
        if name in OPAQUE:
            resolved["x-kubernetes-preserve-unknown-fields"] = True
        else:
            resolved.update(self.node(self.components.get(name) or {}))
        resolved[GO_TYPE] = _go_name(name)
        return resolved

    def node(self, schema: dict[str, Any]) -> dict[str, Any]:
        ref = schema.get("$ref") or next(
            (s.get("$ref") for s in schema.get("allOf") or [] if "$ref" in s), None
        )
        if ref:
            return self.named(str(ref).removeprefix(REF))
        out: dict[str, Any] = {}
        if "properties" in schema:
            out["properties"] = {k: self.node(v) for k, v in schema["properties"].items()}
        if isinstance(schema.get("additionalProperties"), dict):
            out["additionalProperties"] = self.node(schema["additionalProperties"])
        if isinstance(schema.get("items"), dict):
            out["items"] = self.node(schema["items"])
        if schema.get("type") == "object" and "properties" not in out and "additionalProperties" not in out:
            out["x-kubernetes-preserve-unknown-fields"] = True  # an object the decoder keeps as it is
        # How a strategic merge patch and managedFields treat a list or map (a field of its own), and the
        # JSON type the decoder takes.
        for key in (*PATCH_KEYS, *LIST_KEYS, *TYPE_KEYS):
            if key in schema:
                out[key] = schema[key]
        return out


def _go_name(component: str) -> str:
    """`io.k8s.api.core.v1.PodSpec` as Go prints its type: `v1.PodSpec` (its package, then its name)."""
    parts = component.split(".")
    return ".".join(parts[-2:]) if len(parts) >= 2 else component
