"""The resource types a CustomResourceDefinition defines, one per served version."""

from __future__ import annotations

from typing import Any

from kubesim.apiserver.resources import AGE, Column, ResourceType, ScalePaths
from kubesim.apiserver.schema import CrdSchema


def from_crd(crd: dict[str, Any]) -> list[ResourceType]:
    """The resource types a CRD defines, one per served version."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    types = []
    for version in spec.get("versions") or []:
        if not version.get("served", True):
            continue
        subs = version.get("subresources") or {}
        columns = [
            Column(
                c["name"],
                c["jsonPath"],
                c.get("type", "string"),
                int(c.get("priority", 0)),
                c.get("description", ""),
            )
            for c in version.get("additionalPrinterColumns") or []
        ]
        if not any(c.json_path == ".metadata.creationTimestamp" for c in columns):
            columns.append(AGE)
        types.append(
            ResourceType(
                group=spec["group"],
                version=version["name"],
                kind=names["kind"],
                plural=names["plural"],
                singular=names.get("singular", ""),
                short_names=list(names.get("shortNames") or []),
                categories=list(names.get("categories") or []),
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                subresources=frozenset(k for k in subs if k in ("status", "scale")),
                status_subresource="status" in subs,
                scale_paths=ScalePaths.of(subs["scale"] or {}) if "scale" in subs else None,
                columns=columns,
                crd=True,
                schema=CrdSchema(openapi)
                if (openapi := (version.get("schema") or {}).get("openAPIV3Schema"))
                else None,
            )
        )
    return types
