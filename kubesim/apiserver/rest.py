"""The REST handlers of kubesim's resources, as the API server's generic registry serves them: list (as JSON
or a Table), watch, get, create, update, patch and delete of one object or a collection, dry runs, and the
subresources (status, scale, eviction, binding, token, log)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import msgspec
from aiohttp import web

from kubesim.apiserver import managed_fields, subresources, tables
from kubesim.apiserver.admitting import Admitting
from kubesim.apiserver.auth import Authenticator
from kubesim.apiserver.errors import ApiError, method_not_allowed, not_found
from kubesim.apiserver.eviction import evict, eviction_body
from kubesim.apiserver.http_common import Target, encode, json_response, read_body, wants_table, warned
from kubesim.apiserver.listing import ListQuery
from kubesim.apiserver.records import Obj
from kubesim.apiserver.resources import ResourceType
from kubesim.apiserver.schema import field_validation
from kubesim.apiserver.store import Store
from kubesim.apiserver.watch_stream import WatchStream
from kubesim.apiserver.webhooks import Admission
from kubesim.options import SimOptions


def manager_of(request: web.Request) -> str:
    """Whom a write's managedFields name: its `fieldManager`, else its User-Agent's product."""
    return managed_fields.manager_of(request.query.get("fieldManager"), request.headers.get("User-Agent"))


class Resources:
    def __init__(
        self, store: Store, options: SimOptions, watches: WatchStream, *, auth: Authenticator
    ) -> None:
        self.store, self.options, self.watches, self.auth = store, options, watches, auth
        self.admitting = Admitting(store, Admission(store, options))
        # Evictions of these pods ("namespace/name") wait until their event is set, as behind a validating
        # webhook on pods/eviction that takes its time to answer (tests hold one there to widen a window).
        self.eviction_holds: dict[str, asyncio.Event] = {}
        # A container's log, from the runtime of pods kubesim runs as processes: (pod, container) -> bytes.
        self.container_log: Callable[[Obj, str, bool], bytes | None] = lambda pod, container, previous: None

    async def close_clients(self) -> None:
        """The connections kept to admission webhooks go (the simulator stops)."""
        await self.admitting.admission.close()

    async def handle(self, request: web.Request, t: Target) -> web.StreamResponse:
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
                return self.list_response(request, t)
            if method == "POST":
                if t.rt.namespaced and t.namespace is None:
                    raise method_not_allowed("create needs a namespace in the path")
                warnings: list[str] = []
                how = field_validation(query, "CreateOptions")
                body = await read_body(request)
                if self.admitting.active():
                    body = await self.admitting.create(request, t, body, how=how, warnings=warnings)
                created = store.verbs.create(
                    t.rt,
                    ns,
                    body,
                    dry_run=dry_run,
                    field_validation=how,
                    warnings=warnings,
                    manager=manager_of(request),
                )
                return warned(self._object_response(request, t.rt, created, status=201), warnings)
            if method == "DELETE":
                return await self._delete_collection(request, t)
            raise method_not_allowed(f"{method} is not supported on a collection")
        name = t.name
        if t.subresource == "eviction":
            if method != "POST":
                raise method_not_allowed("eviction only accepts POST")
            body = eviction_body(
                await read_body(request), request.query.getall("dryRun", []), namespace=ns, name=name
            )
            hold = self.eviction_holds.get(f"{ns}/{name}")
            if hold is not None:
                await hold.wait()
            warnings = []
            if self.admitting.active():
                body = await self.admitting.evict(request, t, body, warnings=warnings)
            result = evict(store, self.options, ns, name=name, body=body)
            return warned(json_response(result, 201), warnings)
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
            how = field_validation(query, "UpdateOptions")
            body = await read_body(request)
            if self.admitting.active():
                body = await self.admitting.update(request, t, body, how=how, warnings=warnings)
            updated = store.verbs.update(
                t.rt,
                ns,
                name,
                obj=body,
                subresource=t.subresource,
                dry_run=dry_run,
                field_validation=how,
                warnings=warnings,
                manager=manager_of(request),
            )
            return warned(self._object_response(request, t.rt, updated), warnings)
        if method == "PATCH":
            apply = await subresources.patcher(request, t.rt)
            warnings = []
            if self.admitting.active():
                apply = await self.admitting.patch(request, t, apply, warnings=warnings)
            patched = store.verbs.patch(
                t.rt,
                ns,
                name,
                apply=apply,
                subresource=t.subresource,
                dry_run=dry_run,
                field_validation=field_validation(query, "PatchOptions"),
                warnings=warnings,
                manager=manager_of(request),
            )
            return warned(self._object_response(request, t.rt, patched), warnings)
        if method == "DELETE":
            options = await read_body(request, required=False)
            if "gracePeriodSeconds" in query:
                options["gracePeriodSeconds"] = int(query["gracePeriodSeconds"])
            if "propagationPolicy" in query:
                options["propagationPolicy"] = query["propagationPolicy"]
            dry_run = dry_run or "All" in (options.get("dryRun") or [])
            if self.admitting.active():
                await self.admitting.delete(request, t, dry_run=dry_run)
            result = store.verbs.delete(t.rt, ns, name, options=options, dry_run=dry_run)
            return self._object_response(request, t.rt, result)
        raise method_not_allowed(f"{method} is not supported")

    def _object_response(
        self, request: web.Request, rt: ResourceType, obj: Obj, *, status: int = 200
    ) -> web.Response:
        if wants_table(request):
            return json_response(tables.table(rt, [obj], obj["metadata"].get("resourceVersion", "")), status)
        return json_response(obj, status)

    def list_response(self, request: web.Request, t: Target) -> web.Response:
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

    async def _delete_collection(self, request: web.Request, t: Target) -> web.Response:
        """Each object deleted as its own delete is, admission webhooks asked for each: one that refuses
        keeps its object, and the request answers with that refusal once the others are done."""
        query = ListQuery(t.namespace, request.query.get("labelSelector"), request.query.get("fieldSelector"))
        items = self.store.list_raw(t.rt, query).items
        deleted, refused = [], None
        admitted = self.admitting.active()
        for raw in items:
            obj = msgspec.json.decode(raw)
            meta = obj["metadata"]
            one = Target(t.rt, meta.get("namespace"), meta["name"], None)
            if admitted:
                try:
                    await self.admitting.delete(request, one, dry_run=False)
                except ApiError as exc:
                    refused = refused or exc
                    continue
            with contextlib.suppress(ApiError):  # gone meanwhile
                deleted.append(self.store.verbs.delete(t.rt, meta.get("namespace", ""), meta["name"]))
        if refused is not None:
            raise refused
        return json_response(
            {
                "kind": t.rt.list_kind,
                "apiVersion": t.rt.api_version,
                "metadata": {"resourceVersion": str(self.store.rv)},
                "items": deleted,
            }
        )
