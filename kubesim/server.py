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
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec
from aiohttp import web

from kubesim import openapi, protobuf, tables
from kubesim.auth import Authenticator, User, impersonated, user_named
from kubesim.errors import ApiError, bad_request, method_not_allowed, not_found, unsupported_media_type
from kubesim.eviction import evict
from kubesim.options import SimOptions
from kubesim.patch import json_patch, merge_patch, strategic_merge_patch
from kubesim.rbac import Attributes, Authorizer, review_attributes
from kubesim.resources import ResourceType
from kubesim.schema import field_validation
from kubesim.selectors import parse_field_selector, parse_label_selector
from kubesim.store import Obj, Store, Watch, encode_event

log = logging.getLogger("kubesim.server")
_encode = msgspec.json.Encoder().encode
CLOSE = b""  # queued into every open watch when the server stops, so each ends at once
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


@dataclass
class Target:
    rt: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None


def _warned(response: web.Response, warnings: list[str]) -> web.Response:
    """Each warning as its own `Warning` header, in the API server's form (code 299, agent "-")."""
    for text in warnings:
        response.headers.add("Warning", f"299 - {json.dumps(text)}")
    return response


def json_response(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=_encode(body), status=status, content_type="application/json")


def error_response(error: ApiError) -> web.Response:
    return json_response(error.status(), status=error.code)


class ApiServer:
    def __init__(self, store: Store, options: SimOptions) -> None:
        self.store = store
        self.options = options
        self.requests = 0
        self._touches = 0
        self.auth = Authenticator(store)
        self.authorizer = Authorizer(store)
        # Evictions of these pods ("namespace/name") wait until their event is set, as behind a validating
        # webhook on pods/eviction that takes its time to answer (tests hold one there to widen a window).
        self.eviction_holds: dict[str, asyncio.Event] = {}
        # A container's log, from the runtime of pods kubesim runs as processes: (pod, container) -> bytes.
        self.container_log: Callable[[Obj, str, bool], bytes | None] = lambda pod, container, previous: None

    def _pod_log(self, pod: Obj, query: Mapping[str, str]) -> bytes:
        """`pods/log` as the kubelet serves it through the API server: the container's output."""
        name = pod["metadata"]["name"]
        containers = [c["name"] for c in pod["spec"].get("containers") or []]
        container = query.get("container")
        if not container:
            if len(containers) != 1:
                choices = " ".join(containers)
                raise bad_request(
                    f"a container name must be specified for pod {name}, choose one of: [{choices}]"
                )
            container = containers[0]
        if container not in containers:
            raise bad_request(f"container {container} is not valid for pod {name}")
        previous = query.get("previous", "") in ("1", "t", "T", "true", "TRUE", "True")  # Go's ParseBool
        log = self.container_log(pod, container, previous)
        if log is None and previous:
            raise bad_request(f'previous terminated container "{container}" in pod "{name}" not found')
        if log is None:
            raise bad_request(
                f'container "{container}" in pod "{name}" is waiting to start: ContainerCreating'
            )
        tail = query.get("tailLines")
        if tail is not None and tail.isdigit():
            log = b"".join(log.splitlines(keepends=True)[-int(tail) :]) if int(tail) else b""
        return log

    def close_watches(self) -> None:
        for watch in list(self.store.watches):
            if watch.queue is not None:
                watch.queue.put_nowait(CLOSE)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self.dispatch)
        return app

    # ----------------------------------------------------------------------------------------------------

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
        user = self._user(request)
        resource_path = (parts[:1] == ["api"] and len(parts) >= 3) or (
            parts[:1] == ["apis"] and len(parts) >= 4
        )
        if not resource_path:
            self.authorizer.check(user, Attributes(request.method.lower(), path=request.path))
        if path in ("/healthz", "/readyz", "/livez"):
            return web.Response(text="ok")
        if path == "/version":
            return json_response(KUBE_VERSION)
        if path == "/api":
            return json_response(
                {
                    "kind": "APIVersions",
                    "versions": ["v1"],
                    "serverAddressByClientCIDRs": [
                        {"clientCIDR": "0.0.0.0/0", "serverAddress": request.host}
                    ],
                }
            )
        if path == "/apis":
            return json_response(self._group_list())
        if parts[:2] == ["kubesim", "touch"] and request.method == "POST":
            return json_response(await self._touch(request))
        if parts[:2] == ["openapi", "v3"]:
            if len(parts) == 2:
                return json_response(openapi.index(self.store.registry))
            rest = parts[2:]
            group, version = (
                ("", rest[1])
                if rest[0] == "api" and len(rest) == 2
                else ((rest[1], rest[2]) if rest[0] == "apis" and len(rest) == 3 else ("?", "?"))
            )
            doc = openapi.document(self.store.registry, group, version)
            if doc is None:
                raise not_found("openapi", path)
            return json_response(doc)
        if parts[:1] == ["openapi"]:
            raise not_found("openapi", path)
        if parts[0] == "api" and len(parts) == 2:
            return json_response(self._resource_list("", parts[1]))
        if parts[0] == "apis" and len(parts) == 2:
            api_group = self._group(parts[1])
            if api_group is None:
                raise not_found("groups", parts[1])
            return json_response(api_group)
        if parts[0] == "apis" and len(parts) == 3:
            listing = self._resource_list(parts[1], parts[2])
            if not listing["resources"]:
                raise not_found("groupversions", f"{parts[1]}/{parts[2]}")
            return json_response(listing)
        target = self._target(parts)
        attrs = Attributes(
            _verb(request, target),
            target.rt.group,
            target.rt.plural,
            target.subresource or "",
            target.namespace,
            target.name,
        )
        self.authorizer.check(user, attrs)
        if target.rt.group == "authorization.k8s.io":
            return json_response(self._review(user, target, await _body(request)), 201)
        if target.rt.kind == "SelfSubjectReview":  # kubectl auth whoami
            info = {
                "username": user.name,
                "groups": list(user.groups),
                **({"uid": user.uid} if user.uid else {}),
            }
            body = {"kind": "SelfSubjectReview", "apiVersion": "authentication.k8s.io/v1", "metadata": {}}
            return json_response({**body, "status": {"userInfo": info}}, 201)
        return await self._resource(request, target)

    def _user(self, request: web.Request) -> User:
        """Who is asking: authenticated, then (if asked and allowed) impersonated."""
        user = self.auth.authenticate(request.headers)
        as_user = impersonated(request.headers, request.headers.getall("Impersonate-Group", []))
        if as_user is None:
            return user
        account = as_user.service_account
        if account is not None:
            self.authorizer.check(
                user, Attributes("impersonate", "", "serviceaccounts", "", account[0], account[1])
            )
        else:
            self.authorizer.check(user, Attributes("impersonate", "", "users", "", None, as_user.name))
        for group in request.headers.getall("Impersonate-Group", []):
            self.authorizer.check(user, Attributes("impersonate", "", "groups", "", None, group))
        return as_user

    def _review(self, user: User, target: Target, body: dict[str, Any]) -> dict[str, Any]:
        """SelfSubjectAccessReview, SubjectAccessReview and SelfSubjectRulesReview, answered from RBAC."""
        spec = dict(body.get("spec") or {})
        kind = target.rt.kind
        if kind == "SelfSubjectRulesReview":
            namespace = str(spec.get("namespace") or "")
            rules = self.authorizer.rules(user, namespace)
            status: dict[str, Any] = {"resourceRules": rules, "nonResourceRules": [], "incomplete": False}
        else:
            subject = user
            if kind in ("SubjectAccessReview", "LocalSubjectAccessReview"):
                subject = user_named(
                    str(spec.get("user") or ""), list(spec.get("groups") or ()), str(spec.get("uid") or "")
                )
            allowed, reason = self.authorizer.decide(subject, review_attributes(spec))
            status = {"allowed": allowed, **({"reason": reason} if reason else {})}
        return {
            "kind": kind,
            "apiVersion": "authorization.k8s.io/v1",
            "metadata": {"creationTimestamp": None},
            "spec": spec,
            "status": status,
        }

    def _target(self, parts: list[str]) -> Target:
        if parts[0] == "api" and len(parts) >= 3:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[0] == "apis" and len(parts) >= 4:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise not_found("path", "/" + "/".join(parts))
        namespace: str | None = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            candidate = self.store.registry.get(group, version, rest[2])
            if candidate is not None and candidate.namespaced:
                namespace, rest = rest[1], rest[2:]
        rt = self.store.registry.get(group, version, rest[0])
        if rt is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if sub is not None and sub not in rt.subresources:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if len(rest) > 3:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return Target(rt, namespace, name, sub)

    # ----------------------------------------------------------------------------------------------------
    # Discovery

    def _resource_list(self, group: str, version: str) -> dict[str, Any]:
        resources: list[dict[str, Any]] = []
        for rt in sorted(self.store.registry.all(), key=lambda r: r.plural):
            if rt.group == group and rt.version == version:
                resources.extend(rt.discovery())
        gv = f"{group}/{version}" if group else version
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}

    def _group(self, name: str) -> dict[str, Any] | None:
        versions = self.store.registry.groups().get(name)
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
        groups = [self._group(name) for name in sorted(self.store.registry.groups())]
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [g for g in groups if g]}

    # ----------------------------------------------------------------------------------------------------
    # Resources

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
                    return await self._watch(request, t)
                return self._list(request, t)
            if method == "POST":
                if t.rt.namespaced and t.namespace is None:
                    raise method_not_allowed("create needs a namespace in the path")
                warnings: list[str] = []
                created = store.create(
                    t.rt,
                    ns,
                    await _body(request),
                    dry_run=dry_run,
                    field_validation=field_validation(query, "CreateOptions"),
                    warnings=warnings,
                )
                return _warned(self._object_response(request, t.rt, created, 201), warnings)
            if method == "DELETE":
                return self._delete_collection(request, t)
            raise method_not_allowed(f"{method} is not supported on a collection")
        name = t.name
        if t.subresource == "eviction":
            if method != "POST":
                raise method_not_allowed("eviction only accepts POST")
            body = await _body(request)
            hold = self.eviction_holds.get(f"{ns}/{name}")
            if hold is not None:
                await hold.wait()
            result = evict(store, self.options, ns, name, body)
            return json_response(result, 201)
        if t.subresource == "token" and t.rt.plural == "serviceaccounts":
            if method != "POST":
                raise method_not_allowed("token only accepts POST")
            return json_response(self.auth.request_token(ns, name, await _body(request)), 201)
        if t.subresource == "binding":
            if method != "POST":
                raise method_not_allowed("binding only accepts POST")
            return json_response(self._bind(ns, name, await _body(request)), 201)
        if t.subresource == "scale":
            return await self._scale(request, t)
        if t.subresource == "log":
            if method != "GET":
                raise method_not_allowed("log only accepts GET")
            return web.Response(
                body=self._pod_log(store.get(t.rt, ns, name), query), content_type="text/plain"
            )
        if method == "GET":
            return self._object_response(request, t.rt, store.get(t.rt, ns, name))
        if method == "PUT":
            warnings = []
            updated = store.update(
                t.rt,
                ns,
                name,
                await _body(request),
                t.subresource,
                dry_run=dry_run,
                field_validation=field_validation(query, "UpdateOptions"),
                warnings=warnings,
            )
            return _warned(self._object_response(request, t.rt, updated), warnings)
        if method == "PATCH":
            apply = await self._patcher(request, t.rt)
            warnings = []
            patched = store.patch(
                t.rt,
                ns,
                name,
                apply,
                t.subresource,
                dry_run=dry_run,
                field_validation=field_validation(query, "PatchOptions"),
                warnings=warnings,
            )
            return _warned(self._object_response(request, t.rt, patched), warnings)
        if method == "DELETE":
            options = await _body(request, required=False)
            if "gracePeriodSeconds" in query:
                options["gracePeriodSeconds"] = int(query["gracePeriodSeconds"])
            if "propagationPolicy" in query:
                options["propagationPolicy"] = query["propagationPolicy"]
            result = store.delete(
                t.rt, ns, name, options, dry_run=dry_run or "All" in (options.get("dryRun") or [])
            )
            return self._object_response(request, t.rt, result)
        raise method_not_allowed(f"{method} is not supported")

    def _object_response(
        self, request: web.Request, rt: ResourceType, obj: Obj, status: int = 200
    ) -> web.Response:
        if _wants_table(request):
            return json_response(tables.table(rt, [obj], obj["metadata"].get("resourceVersion", "")), status)
        return json_response(obj, status)

    def _list(self, request: web.Request, t: Target) -> web.Response:
        query = request.query
        limit = int(query["limit"]) if query.get("limit") else None
        items, rv, token, remaining = self.store.list_raw(
            t.rt,
            t.namespace,
            query.get("labelSelector"),
            query.get("fieldSelector"),
            limit,
            query.get("continue"),
        )
        if _wants_table(request):
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
        head = _encode({"kind": t.rt.list_kind, "apiVersion": t.rt.api_version, "metadata": meta})
        payload = head[:-1] + b',"items":[' + b",".join(items) + b"]}"
        return web.Response(body=payload, content_type="application/json")

    def _delete_collection(self, request: web.Request, t: Target) -> web.Response:
        items, _, _, _ = self.store.list_raw(
            t.rt,
            t.namespace,
            request.query.get("labelSelector"),
            request.query.get("fieldSelector"),
            None,
            None,
        )
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

    async def _watch(self, request: web.Request, t: Target) -> web.StreamResponse:
        query = request.query
        watch = Watch(
            rt=t.rt,
            namespace=t.namespace,
            labels=parse_label_selector(query.get("labelSelector")),
            fields=parse_field_selector(query.get("fieldSelector"), t.rt.fields),
            queue=asyncio.Queue(),
        )
        as_table = _wants_table(request)
        bookmarks = query.get("allowWatchBookmarks") in ("true", "1")
        timeout = float(query["timeoutSeconds"]) if query.get("timeoutSeconds") else None
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        try:
            initial = self.store.open_watch(watch, query.get("resourceVersion"))
        except ApiError as exc:
            await response.prepare(request)
            await response.write(_encode({"type": "ERROR", "object": exc.status()}) + b"\n")
            await response.write_eof()
            return response
        first_table = [True]

        def encode(event_type: str, obj: Obj, raw: bytes) -> bytes:
            if not as_table:
                return encode_event(event_type, raw)
            body = tables.table(t.rt, [obj], obj["metadata"].get("resourceVersion", ""), first_table[0])
            first_table[0] = False
            return _encode({"type": event_type, "object": body}) + b"\n"

        try:
            await response.prepare(request)
            chunk: list[bytes] = []
            for event_type, obj, raw in initial:
                chunk.append(encode(event_type, obj, raw))
                if len(chunk) >= 500:
                    await response.write(b"".join(chunk))
                    chunk = []
            if chunk:
                await response.write(b"".join(chunk))
            await self._stream(response, watch, timeout, bookmarks, as_table, encode)
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.store.close_watch(watch)
        with contextlib.suppress(ConnectionResetError, RuntimeError):
            await response.write_eof()
        return response

    async def _stream(
        self,
        response: web.StreamResponse,
        watch: Watch,
        lifetime: float | None,
        bookmarks: bool,
        as_table: bool,
        encode: Callable[[str, Obj, bytes], bytes],
    ) -> None:
        deadline = time.monotonic() + lifetime if lifetime else None
        queue: asyncio.Queue[bytes] = watch.queue
        next_bookmark = time.monotonic() + self.options.bookmark_interval
        while True:
            now = time.monotonic()
            wait = next_bookmark - now if bookmarks else 3600.0
            if deadline is not None:
                wait = min(wait, deadline - now)
            if wait <= 0:
                if deadline is not None and time.monotonic() >= deadline:
                    return
                if bookmarks:
                    await response.write(self._bookmark(watch.rt, as_table))
                    next_bookmark = time.monotonic() + self.options.bookmark_interval
                continue
            try:
                async with asyncio.timeout(wait):
                    first = await queue.get()
            except TimeoutError:
                continue
            if first == CLOSE:
                return
            batch = [first]
            while not queue.empty() and len(batch) < 1000:
                batch.append(queue.get_nowait())
            closing = CLOSE in batch
            batch = [line for line in batch if line != CLOSE]
            if as_table:
                batch = [self._as_table_line(watch.rt, line, encode) for line in batch]
            await response.write(b"".join(batch))
            if closing:
                return

    def _as_table_line(
        self, rt: ResourceType, line: bytes, encode: Callable[[str, Obj, bytes], bytes]
    ) -> bytes:
        event = msgspec.json.decode(line)
        return encode(event["type"], event["object"], b"")

    def _bookmark(self, rt: ResourceType, as_table: bool) -> bytes:
        obj = {
            "kind": "Table" if as_table else rt.kind,
            "apiVersion": "meta.k8s.io/v1" if as_table else rt.api_version,
            "metadata": {"resourceVersion": str(self.store.rv)},
        }
        return _encode({"type": "BOOKMARK", "object": obj}) + b"\n"

    async def _patcher(self, request: web.Request, rt: ResourceType) -> Callable[[Obj], Obj]:
        content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
        body = await _body(request, allow_list=True)
        if content_type == "application/merge-patch+json":
            return lambda obj: merge_patch(obj, body)
        if content_type == "application/strategic-merge-patch+json":
            if rt.crd:
                raise unsupported_media_type(content_type)
            return lambda obj: strategic_merge_patch(obj, body)
        if content_type == "application/json-patch+json":
            return lambda obj: json_patch(obj, body)
        raise unsupported_media_type(content_type or "<none>")

    async def _touch(self, request: web.Request) -> dict[str, Any]:
        """Load generation for benchmarks (not a Kubernetes API): change `count` objects' labels, cycling
        through them, yielding to the loop between batches as concurrent API writes would."""
        rt = self.store.registry.get(
            request.query.get("group", ""),
            request.query.get("version", "v1"),
            request.query.get("resource", "pods"),
        )
        if rt is None:
            raise not_found("resources", request.query.get("resource", ""))
        count = int(request.query.get("count", "1000"))
        keys = [(o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in self.store.objects(rt)]
        if not keys:
            return {"touched": 0, "resourceVersion": str(self.store.rv)}
        self._touches += 1
        for seq in range(count):
            namespace, name = keys[seq % len(keys)]

            def touch(obj: Obj, seq: int = seq) -> Obj:
                obj["metadata"].setdefault("labels", {})["kubesim-touch"] = f"{self._touches}.{seq}"
                return obj

            self.store.patch(rt, namespace, name, touch)
            if seq % 200 == 199:
                await asyncio.sleep(0)
        return {"touched": count, "resourceVersion": str(self.store.rv)}

    def _bind(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        pods = self.store.registry.get("", "v1", "pods")
        assert pods is not None
        node = (body.get("target") or {}).get("name")
        if not node:
            raise bad_request("binding target.name is required")
        pod = self.store.get(pods, namespace, name)
        if (pod.get("spec") or {}).get("nodeName"):
            raise ApiError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on pods/binding "{name}": pod {name} is '
                f'already assigned to node "{pod["spec"]["nodeName"]}"',
            )

        def bind(obj: Obj) -> Obj:
            obj["spec"]["nodeName"] = node
            return obj

        self.store.patch(pods, namespace, name, bind, subresource="binding")
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}

    async def _scale(self, request: web.Request, t: Target) -> web.Response:
        ns, name = t.namespace or "", t.name or ""
        obj = self.store.get(t.rt, ns, name)

        def scale_of(o: Obj) -> dict[str, Any]:
            spec, status = o.get("spec") or {}, o.get("status") or {}
            selector = ",".join(
                f"{k}={v}" for k, v in ((spec.get("selector") or {}).get("matchLabels") or {}).items()
            )
            return {
                "kind": "Scale",
                "apiVersion": "autoscaling/v1",
                "metadata": {
                    k: o["metadata"][k]
                    for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                    if k in o["metadata"]
                },
                "spec": {"replicas": spec.get("replicas", 1)},
                "status": {"replicas": status.get("replicas", 0), "selector": selector},
            }

        if request.method == "GET":
            return json_response(scale_of(obj))
        if request.method in ("PUT", "PATCH"):
            current_scale = scale_of(obj)
            if request.method == "PUT":
                wanted = await _body(request)
            else:
                apply = await self._patcher(request, t.rt)
                wanted = apply(current_scale)
            replicas = (wanted.get("spec") or {}).get("replicas")
            if not isinstance(replicas, int) or replicas < 0:
                raise ApiError(422, "Invalid", f'Scale "{name}" is invalid: spec.replicas must be >= 0')

            def set_replicas(o: Obj) -> Obj:
                o.setdefault("spec", {})["replicas"] = replicas
                return o

            updated = self.store.patch(t.rt, ns, name, set_replicas)
            return json_response(scale_of(updated))
        raise method_not_allowed(f"{request.method} is not supported on scale")


def _verb(request: web.Request, t: Target) -> str:
    method = request.method
    if method == "GET":
        if t.name is None:
            return "watch" if request.query.get("watch") in ("1", "true") else "list"
        return "get"
    return {
        "POST": "create",
        "PUT": "update",
        "PATCH": "patch",
        "DELETE": "delete" if t.name else "deletecollection",
    }[method]


def _wants_table(request: web.Request) -> bool:
    return "as=Table" in request.headers.get("Accept", "")


async def _body(request: web.Request, required: bool = True, allow_list: bool = False) -> Any:
    raw = await request.read()
    if not raw:
        if required:
            raise bad_request("the request body is empty")
        return {}
    if request.content_type == protobuf.CONTENT_TYPE:
        return protobuf.decode(raw)
    body = msgspec.json.decode(raw)
    if isinstance(body, list) and allow_list:
        return body
    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object")
    return body


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
