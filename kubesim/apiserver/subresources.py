"""The subresources and verbs past plain CRUD: pods/log, pods/binding, the scale subresource, the
patch content types, and kubesim's own load generator for benchmarks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web

from kubesim.apiserver import builtin_openapi
from kubesim.apiserver.errors import (
    ApiError,
    bad_request,
    method_not_allowed,
    not_found,
    unsupported_media_type,
)
from kubesim.apiserver.http_common import Target, json_response, read_body
from kubesim.apiserver.patch import json_patch, merge_patch, strategic_merge_patch
from kubesim.apiserver.records import Obj
from kubesim.apiserver.resources import ResourceType
from kubesim.apiserver.store import Store


def pod_log(
    pod: Obj, query: Mapping[str, str], container_log: Callable[[Obj, str, bool], bytes | None]
) -> bytes:
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
    log = container_log(pod, container, previous)
    if log is None and previous:
        raise bad_request(f'previous terminated container "{container}" in pod "{name}" not found')
    if log is None:
        raise bad_request(f'container "{container}" in pod "{name}" is waiting to start: ContainerCreating')
    tail = query.get("tailLines")
    if tail is not None and tail.isdigit():
        log = b"".join(log.splitlines(keepends=True)[-int(tail) :]) if int(tail) else b""
    return log


async def patcher(request: web.Request, rt: ResourceType) -> Callable[[Obj], Obj]:
    content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
    body = await read_body(request, allow_list=True)
    if content_type == "application/merge-patch+json":
        return lambda obj: merge_patch(obj, body)
    if content_type == "application/strategic-merge-patch+json":
        if rt.crd:
            raise unsupported_media_type(content_type)
        schema = builtin_openapi.schema_of(rt.group, rt.version, rt.kind)
        return lambda obj: strategic_merge_patch(obj, body, schema)
    if content_type == "application/json-patch+json":
        return lambda obj: json_patch(obj, body)
    raise unsupported_media_type(content_type or "<none>")


def bind(store: Store, t: Target, body: dict[str, Any]) -> dict[str, Any]:
    namespace, name = t.namespace or "", t.name or ""
    pods = store.registry.core("pods")
    node = (body.get("target") or {}).get("name")
    if not node:
        raise bad_request("binding target.name is required")
    pod = store.get(pods, namespace, name)
    if (pod.get("spec") or {}).get("nodeName"):
        raise ApiError(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on pods/binding "{name}": pod {name} is '
            f'already assigned to node "{pod["spec"]["nodeName"]}"',
        )

    def assign(obj: Obj) -> Obj:
        obj["spec"]["nodeName"] = node
        return obj

    store.verbs.patch(pods, namespace, name, apply=assign, subresource="binding")
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


async def scale(store: Store, request: web.Request, t: Target) -> web.Response:
    ns, name = t.namespace or "", t.name or ""
    obj = store.get(t.rt, ns, name)

    paths = t.rt.scale_paths

    def scale_of(o: Obj) -> dict[str, Any]:
        spec, status = o.get("spec") or {}, o.get("status") or {}
        if paths is not None:  # a custom resource: where its CRD says (absent: 0, as the API server reads it)
            desired, observed = _at(o, paths.spec) or 0, _at(o, paths.status) or 0
            selector = str(_at(o, paths.selector) or "") if paths.selector else ""
        else:
            desired, observed = spec.get("replicas", 1), status.get("replicas", 0)
            chosen = spec.get("selector") or {}
            # A ReplicationController's selector is the labels themselves; the apps kinds' a LabelSelector.
            labels = chosen if t.rt.group == "" else chosen.get("matchLabels") or {}
            selector = ",".join(f"{k}={v}" for k, v in labels.items())
        return {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {
                k: o["metadata"][k]
                for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                if k in o["metadata"]
            },
            "spec": {"replicas": desired},
            "status": {"replicas": observed, "selector": selector},
        }

    if request.method == "GET":
        return json_response(scale_of(obj))
    if request.method in ("PUT", "PATCH"):
        current_scale = scale_of(obj)
        if request.method == "PUT":
            wanted = await read_body(request)
        else:
            apply = await patcher(request, t.rt)
            wanted = apply(current_scale)
        replicas = (wanted.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or replicas < 0:
            raise ApiError(422, "Invalid", f'Scale "{name}" is invalid: spec.replicas must be >= 0')

        expected = (wanted.get("metadata") or {}).get("resourceVersion")

        def set_replicas(o: Obj) -> Obj:
            *parents, leaf = paths.spec if paths is not None else ("spec", "replicas")
            holder = o
            for part in parents:
                holder = holder.setdefault(part, {})
            holder[leaf] = replicas
            if expected:  # the Scale's resourceVersion is its object's: a precondition (409 when stale)
                o["metadata"]["resourceVersion"] = expected
            return o

        updated = store.verbs.patch(t.rt, ns, name, apply=set_replicas)
        return json_response(scale_of(updated))
    raise method_not_allowed(f"{request.method} is not supported on scale")


async def touch(store: Store, request: web.Request, round_: int) -> dict[str, Any]:
    """Load generation for benchmarks (not a Kubernetes API): change `count` objects' labels, cycling
    through them, yielding to the loop between batches as concurrent API writes would."""
    rt = store.registry.get(
        request.query.get("group", ""),
        request.query.get("version", "v1"),
        request.query.get("resource", "pods"),
    )
    if rt is None:
        raise not_found("resources", request.query.get("resource", ""))
    count = int(request.query.get("count", "1000"))
    keys = [(o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in store.objects(rt)]
    if not keys:
        return {"touched": 0, "resourceVersion": str(store.rv)}
    for seq in range(count):
        namespace, name = keys[seq % len(keys)]

        def relabel(obj: Obj, seq: int = seq) -> Obj:
            obj["metadata"].setdefault("labels", {})["kubesim-touch"] = f"{round_}.{seq}"
            return obj

        store.verbs.patch(rt, namespace, name, apply=relabel)
        if seq % 200 == 199:
            await asyncio.sleep(0)
    return {"touched": count, "resourceVersion": str(store.rv)}


def _at(obj: Obj, path: tuple[str, ...] | None) -> Any:
    """The value at a JSON path of the object (None where it is absent)."""
    value: Any = obj
    for part in path or ():
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value
