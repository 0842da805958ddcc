"""The REST handlers of `events.k8s.io/v1` Events: each request served on the core v1 Events it is a view
of, its bodies and answers converted (kubesim.apiserver.event_view). List, watch, get, create, update, patch
and delete, as for any resource; admission webhooks are not called for this view."""

from __future__ import annotations

from typing import Any

import msgspec
from aiohttp import web

from kubesim.apiserver import event_view, subresources
from kubesim.apiserver.errors import method_not_allowed
from kubesim.apiserver.http_common import Target, json_response, read_body, wants_table, warned
from kubesim.apiserver.rest import Resources, manager_of
from kubesim.apiserver.schema import field_validation
from kubesim.apiserver.write_rules import decode


async def handle(resources: Resources, request: web.Request, t: Target) -> web.StreamResponse:
    store, query, method = resources.store, request.query, request.method
    core = Target(store.registry.core("events"), t.namespace, t.name, t.subresource)
    ns, dry_run = t.namespace or "", query.get("dryRun") == "All"
    if t.name is None and method == "GET":
        if wants_table(request):
            return await resources.handle(request, core)  # the same printer, whichever version is asked
        if query.get("watch") in ("1", "true", "True"):
            return await resources.watches.serve(request, core, convert=event_view.to_view)
        return _as_view_list(resources.list_response(request, core))
    if t.name is None and method == "POST":
        warnings: list[str] = []
        body = await read_body(request)
        decode(t.rt, body, field_validation(query, "CreateOptions"), warnings=warnings)
        event_view.check_create(body)
        created = store.verbs.create(
            core.rt, ns, event_view.to_core(body), dry_run=dry_run, manager=manager_of(request)
        )
        return warned(json_response(event_view.to_view(created), 201), warnings)
    if t.name is None:
        return await resources.handle(request, core)  # a collection's delete answers as the core list does
    if method == "GET":
        return json_response(event_view.to_view(store.get(core.rt, ns, t.name)))
    if method == "PUT":
        body = event_view.to_core(await read_body(request))
        updated = store.verbs.update(
            core.rt, ns, t.name, obj=body, dry_run=dry_run, manager=manager_of(request)
        )
        return json_response(event_view.to_view(updated))
    if method == "PATCH":
        apply = event_view.converted(await subresources.patcher(request, t.rt))
        patched = store.verbs.patch(
            core.rt, ns, t.name, apply=apply, dry_run=dry_run, manager=manager_of(request)
        )
        return json_response(event_view.to_view(patched))
    if method == "DELETE":
        options = await read_body(request, required=False)
        deleted = store.verbs.delete(core.rt, ns, t.name, options=options, dry_run=dry_run)
        return json_response(event_view.to_view(deleted))
    raise method_not_allowed(f"{method} is not supported")


def _as_view_list(response: web.Response) -> web.Response:
    assert isinstance(response.body, bytes)
    listing: dict[str, Any] = msgspec.json.decode(response.body)
    listing["apiVersion"] = f"{event_view.GROUP}/v1"
    listing["items"] = [event_view.to_view(item) for item in listing.get("items") or []]
    return json_response(listing)
