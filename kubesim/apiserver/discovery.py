"""Discovery as the API server serves it: /version, /api, /apis, each group and group version's resource
list, and the OpenAPI v3 documents kubectl reads.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from kubesim.apiserver import openapi
from kubesim.apiserver.errors import not_found
from kubesim.apiserver.http_common import json_response
from kubesim.apiserver.resources import Registry

KUBE_VERSION = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-kubesim",
    "platform": "linux/amd64",
    "goVersion": "go1.23",
    "compiler": "gc",
    "buildDate": "2026-01-01T00:00:00Z",
    "gitCommit": "kubesim",
    "gitTreeState": "clean",
}


class Discovery:
    def __init__(self, registry: Registry) -> None:
        self.registry = registry

    def answer(self, request: web.Request, parts: list[str]) -> web.Response | None:
        """The answer to a discovery path, or None where the path is not one."""
        path = "/" + "/".join(parts)
        if path == "/version":
            return json_response(KUBE_VERSION)
        if path == "/api":
            addresses = [{"clientCIDR": "0.0.0.0/0", "serverAddress": request.host}]
            return json_response(
                {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": addresses}
            )
        if path == "/apis":
            return json_response(self._group_list())
        if parts[:1] == ["openapi"]:
            return self._openapi(parts[1:])
        if parts[:1] == ["api"] and len(parts) == 2:
            return json_response(self._resource_list("", parts[1]))
        if parts[:1] == ["apis"] and len(parts) == 2:
            api_group = self._group(parts[1])
            if api_group is None:
                raise not_found("groups", parts[1])
            return json_response(api_group)
        if parts[:1] == ["apis"] and len(parts) == 3:
            listing = self._resource_list(parts[1], parts[2])
            if not listing["resources"]:
                raise not_found("groupversions", f"{parts[1]}/{parts[2]}")
            return json_response(listing)
        return None

    def _openapi(self, parts: list[str]) -> web.Response:
        if parts[:1] != ["v3"]:
            raise not_found("openapi", "/openapi/" + "/".join(parts))
        if len(parts) == 1:
            return json_response(openapi.index(self.registry))
        rest = parts[1:]
        group, version = "?", "?"
        if rest[0] == "api" and len(rest) == 2:
            group, version = "", rest[1]
        elif rest[0] == "apis" and len(rest) == 3:
            group, version = rest[1], rest[2]
        doc = openapi.document(self.registry, group, version)
        if doc is None:
            raise not_found("openapi", "/openapi/" + "/".join(parts))
        return json_response(doc)

    def _resource_list(self, group: str, version: str) -> dict[str, Any]:
        resources: list[dict[str, Any]] = []
        for rt in sorted(self.registry.all(), key=lambda r: r.plural):
            if rt.group == group and rt.version == version:
                resources.extend(rt.discovery())
        gv = f"{group}/{version}" if group else version
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}

    def _group(self, name: str) -> dict[str, Any] | None:
        versions = self.registry.groups().get(name)
        if not versions:
            return None
        entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
        return {
            "kind": "APIGroup",
            "apiVersion": "v1",
            "name": name,
            "versions": entries,
            "preferredVersion": entries[0],
        }

    def _group_list(self) -> dict[str, Any]:
        groups = [self._group(name) for name in sorted(self.registry.groups())]
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [g for g in groups if g]}
