"""kubesim's HTTP front: the Kubernetes REST protocol over the store.

Paths, verbs, content types and error bodies follow the API server closely enough that the official Python
client and kubectl work unchanged: discovery, list (selectors, limit/continue), watch (resume, bookmarks,
timeoutSeconds, 410 as an ERROR event), create/update/patch (merge, strategic merge, JSON patch), delete
(grace, preconditions, propagation), dryRun=All, the status/scale/eviction/binding subresources, and
server-side Tables for `kubectl get`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter

import msgspec
from aiohttp import web

from kubesim.apiserver import event_rest, event_view, subresources
from kubesim.apiserver.access import Access
from kubesim.apiserver.auth import Authenticator
from kubesim.apiserver.discovery import Discovery
from kubesim.apiserver.errors import ApiError, bad_request, internal_error, not_found
from kubesim.apiserver.http_common import (
    REGISTRY,
    USER,
    Target,
    error_response,
    json_response,
    read_body,
    verb,
)
from kubesim.apiserver.rbac import Attributes, Authorizer
from kubesim.apiserver.rest import Resources
from kubesim.apiserver.store import Store
from kubesim.apiserver.watch_stream import WatchStream
from kubesim.options import SimOptions

log = logging.getLogger("kubesim.apiserver.server")
_NOT_FOUND = "the server could not find the requested resource"


class ApiServer:
    def __init__(self, store: Store, options: SimOptions) -> None:
        self.store = store
        self.options = options
        self.requests = 0
        self._internal_seen: set[tuple[str, str, int] | None] = set()
        # Resource requests by user (impersonated, if so), verb and resource, as apiserver_request_total.
        self.requests_by_verb: Counter[tuple[str, str, str]] = Counter()
        self._touches = 0
        self.auth = Authenticator(store)
        self.authorizer = Authorizer(store)
        self.access = Access(self.auth, self.authorizer)
        self.discovery = Discovery(store.registry)
        self.watches = WatchStream(store, options)
        self.resources = Resources(store, options, self.watches, auth=self.auth)

    def close_watches(self) -> None:
        self.watches.close_all()

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app[REGISTRY] = self.store.registry
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
            self._log_internal(request, exc)
            return error_response(internal_error(exc))

    def _log_internal(self, request: web.Request, exc: Exception) -> None:
        """One line each time; the traceback the first time this error is raised from where it was."""
        frame = exc.__traceback__
        while frame is not None and frame.tb_next is not None:
            frame = frame.tb_next
        where = (type(exc).__name__, frame.tb_frame.f_code.co_filename, frame.tb_lineno) if frame else None
        first = where not in self._internal_seen
        self._internal_seen.add(where)
        log.error(
            "internal error on %s %s: %s: %s",
            request.method,
            request.path,
            type(exc).__name__,
            exc,
            exc_info=exc if first else None,
        )

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
        request[USER] = user  # whom admission webhooks are told the request is from
        if event_view.is_view(rt):
            return await event_rest.handle(self.resources, request, target)
        return await self.resources.handle(request, target)

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
