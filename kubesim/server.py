"""kubesim's HTTP front: the Kubernetes REST protocol over the store.

Paths, verbs, content types and error bodies follow the API server closely enough that the official Python
client and kubectl work unchanged: discovery, list (selectors, limit/continue), watch (resume, bookmarks,
timeoutSeconds, 410 as an ERROR event), create/update/patch (merge, strategic merge, JSON patch), delete
(grace, preconditions, propagation), dryRun=All, the status/scale/eviction/binding subresources, and
server-side Tables for `kubectl get`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import Counter
from collections.abc import Callable
from typing import Any

import msgspec
from aiohttp import web

from kubesim import subresources, tables
from kubesim.access import Access
from kubesim.auth import Authenticator
from kubesim.discovery import Discovery
from kubesim.errors import ApiError, bad_request, method_not_allowed, not_found
from kubesim.eviction import evict
from kubesim.http_common import (
    Target,
    encode,
    error_response,
    json_response,
    read_body,
    verb,
    wants_table,
    warned,
)
from kubesim.listing import ListQuery
from kubesim.options import SimOptions
from kubesim.rbac import Attributes, Authorizer
from kubesim.records import Obj
from kubesim.resources import ResourceType
from kubesim.schema import field_validation
from kubesim.store import Store
from kubesim.watch_stream import WatchStream

log = logging.getLogger("kubesim.server")
_NOT_FOUND = "the server could not find the requested resource"


class ApiServer:
    def __init__(self, store: Store, options: SimOptions) -> None:
        self.store = store
        self.options = options
        self.requests = 0
        # Resource requests by user (impersonated, if so), verb and resource, as apiserver_request_total.
        self.requests_by_verb: Counter[tuple[str, str, str]] = Counter()
        self._touches = 0
        self.auth = Authenticator(store)
        self.authorizer = Authorizer(store)
        self.access = Access(self.auth, self.authorizer)
        self.discovery = Discovery(store.registry)
        self.watches = WatchStream(store, options)
        # Evictions of these pods ("namespace/name") wait until their event is set, as behind a validating
        # webhook on pods/eviction that takes its time to answer (tests hold one there to widen a window).
        self.eviction_holds: dict[str, asyncio.Event] = {}
        # A container's log, from the runtime of pods kubesim runs as processes: (pod, container) -> bytes.
        self.container_log: Callable[[Obj, str, bool], bytes | None] = lambda pod, container, previous: None

    def close_watches(self) -> None:
        self.watches.close_all()

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self.dispatch)
        return app

    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        try:
            return await self._dispatch(request)
        except ApiError as exc:
            return error_response(exc)
        except (json.JSONDecodeError, msgspec.DecodeError) as exc:
            return error_response(bad_request(f"the request body is not valid JSON: {exc}"))
        except (ConnectionResetError, asyncio.CancelledError):
            raise
        except Exception as exc:  # a bug in kubesim must still answer as an API server would
            log.exception("internal error on %s %s", request.method, request.path)
            return error_response(ApiError(500, "InternalError", f"an error on the server: {exc!r}"))

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.path.rstrip("/") or "/"
        parts = [p for p in path.split("/") if p]
        user = self.access.user(request)
        resource_path = (parts[:1] == ["api"] and len(parts) >= 3) or (
            parts[:1] == ["apis"] and len(parts) >= 4
        )
        if not resource_path:
            self.authorizer.check(user, Attributes(request.method.lower(), path=request.path))
            if path in ("/healthz", "/readyz", "/livez"):
                return web.Response(text="ok")
            if parts[:2] == ["kubesim", "touch"] and request.method == "POST":
                self._touches += 1
                return json_response(await subresources.touch(self.store, request, self._touches))
            answer = self.discovery.answer(request, parts)
            if answer is None:
                raise not_found("path", path)
            return answer
        target = self._target(parts)
        rt = target.rt
        attrs = Attributes(
            verb(request, target),
            rt.group,
            rt.plural,
            target.subresource or "",
            target.namespace,
            target.name,
        )
        self.authorizer.check(user, attrs)
        self.requests_by_verb[(user.name, attrs.verb, target.resource)] += 1
        if rt.group in ("authorization.k8s.io", "authentication.k8s.io"):  # reviews: answered, never stored
            return json_response(self.access.answer(user, target, await read_body(request)), 201)
        return await self._resource(request, target)

    def _target(self, parts: list[str]) -> Target:
        if parts[0] == "api":
            group, version, rest = "", parts[1], parts[2:]
        else:
            group, version, rest = parts[1], parts[2], parts[3:]
        namespace: str | None = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            candidate = self.store.registry.get(group, version, rest[2])
            if candidate is not None and candidate.namespaced:
                namespace, rest = rest[1], rest[2:]
        rt = self.store.registry.get(group, version, rest[0])
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if rt is None or (sub is not None and sub not in rt.subresources) or len(rest) > 3:
            raise ApiError(404, "NotFound", _NOT_FOUND)
        return Target(rt, namespace, name, sub)

    async def _resource(self, request: web.Request, t: Target) -> web.StreamResponse:
        method = request.method
        query = request.query
        dry_run = query.get("dryRun") == "All"
        store = self.store
        ns = t.namespace or ""
        if t.rt.namespaced and t.name is not None and t.namespace is None:
            raise not_found(t.rt.plural, t.name, t.rt.group)
        if t.name is None:
            if method == "GET":
                if query.get("watch") in ("1", "true", "True"):
                    return await self.watches.serve(request, t)
                return self._list(request, t)
            if method == "POST":
                if t.rt.namespaced and t.namespace is None:
                    raise method_not_allowed("create needs a namespace in the path")
                warnings: list[str] = []
                created = store.create(
                    t.rt,
                    ns,
                    await read_body(request),
                    dry_run=dry_run,
                    field_validation=field_validation(query, "CreateOptions"),
                    warnings=warnings,
                )
                return warned(self._object_response(request, t.rt, created, status=201), warnings)
            if method == "DELETE":
                return self._delete_collection(request, t)
            raise method_not_allowed(f"{method} is not supported on a collection")
        name = t.name
        if t.subresource == "eviction":
            if method != "POST":
                raise method_not_allowed("eviction only accepts POST")
            body = await read_body(request)
            hold = self.eviction_holds.get(f"{ns}/{name}")
            if hold is not None:
                await hold.wait()
            result = evict(store, self.options, ns, name=name, body=body)
            return json_response(result, 201)
        if t.subresource == "token" and t.rt.plural == "serviceaccounts":
            if method != "POST":
                raise method_not_allowed("token only accepts POST")
            return json_response(self.auth.request_token(ns, name, await read_body(request)), 201)
        if t.subresource == "binding":
            if method != "POST":
                raise method_not_allowed("binding only accepts POST")
            return json_response(subresources.bind(store, t, await read_body(request)), 201)
        if t.subresource == "scale":
            return await subresources.scale(store, request, t)
        if t.subresource == "log":
            if method != "GET":
                raise method_not_allowed("log only accepts GET")
            return web.Response(
                body=subresources.pod_log(store.get(t.rt, ns, name), query, self.container_log),
                content_type="text/plain",
            )
        if method == "GET":
            return self._object_response(request, t.rt, store.get(t.rt, ns, name))
        if method == "PUT":
            warnings = []
            updated = store.update(
                t.rt,
                ns,
                name,
                obj=await read_body(request),
                subresource=t.subresource,
                dry_run=dry_run,
                field_validation=field_validation(query, "UpdateOptions"),
                warnings=warnings,
            )
            return warned(self._object_response(request, t.rt, updated), warnings)
        if method == "PATCH":
            apply = await subresources.patcher(request, t.rt)
            warnings = []
            patched = store.patch(
                t.rt,
                ns,
                name,
                apply=apply,
                subresource=t.subresource,
                dry_run=dry_run,
                field_validation=field_validation(query, "PatchOptions"),
                warnings=warnings,
            )
            return warned(self._object_response(request, t.rt, patched), warnings)
        if method == "DELETE":
            options = await read_body(request, required=False)
            if "gracePeriodSeconds" in query:
                options["gracePeriodSeconds"] = int(query["gracePeriodSeconds"])
            if "propagationPolicy" in query:
                options["propagationPolicy"] = query["propagationPolicy"]
            result = store.delete(
                t.rt, ns, name, options=options, dry_run=dry_run or "All" in (options.get("dryRun") or [])
            )
            return self._object_response(request, t.rt, result)
        raise method_not_allowed(f"{method} is not supported")

    def _object_response(
        self, request: web.Request, rt: ResourceType, obj: Obj, *, status: int = 200
    ) -> web.Response:
        if wants_table(request):
            return json_response(tables.table(rt, [obj], obj["metadata"].get("resourceVersion", "")), status)
        return json_response(obj, status)

    def _list(self, request: web.Request, t: Target) -> web.Response:
        query = request.query
        limit = int(query["limit"]) if query.get("limit") else None
        page = self.store.list_raw(
            t.rt,
            ListQuery(
                t.namespace,
                query.get("labelSelector"),
                query.get("fieldSelector"),
                limit,
                query.get("continue"),
            ),
        )
        items, rv, token, remaining = page.items, page.resource_version, page.continue_token, page.remaining
        if wants_table(request):
            objects = [msgspec.json.decode(raw) for raw in items]
            body = tables.table(t.rt, objects, rv)
            if token:
                body["metadata"]["continue"] = token
            return json_response(body)
        meta: dict[str, Any] = {"resourceVersion": rv}
        if token:
            meta["continue"] = token
        if remaining is not None:
            meta["remainingItemCount"] = remaining
        head = encode({"kind": t.rt.list_kind, "apiVersion": t.rt.api_version, "metadata": meta})
        payload = head[:-1] + b',"items":[' + b",".join(items) + b"]}"
        return web.Response(body=payload, content_type="application/json")

    def _delete_collection(self, request: web.Request, t: Target) -> web.Response:
        query = ListQuery(t.namespace, request.query.get("labelSelector"), request.query.get("fieldSelector"))
        items = self.store.list_raw(t.rt, query).items
        deleted = []
        for raw in items:
            obj = msgspec.json.decode(raw)
            meta = obj["metadata"]
            with contextlib.suppress(ApiError):
                deleted.append(self.store.delete(t.rt, meta.get("namespace", ""), meta["name"]))
        return json_response(
            {
                "kind": t.rt.list_kind,
                "apiVersion": t.rt.api_version,
                "metadata": {"resourceVersion": str(self.store.rv)},
                "items": deleted,
            }
        )
