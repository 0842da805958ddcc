"""What every kubesim HTTP handler shares: the request's target, request bodies, JSON answers, and the
API server's ways of saying which verb a request is and whether it asks for a Table.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import msgspec
from aiohttp import web

from kubesim.apiserver import protobuf
from kubesim.apiserver.auth import User
from kubesim.apiserver.errors import ApiError, bad_request
from kubesim.apiserver.resources import Registry, ResourceType

encode = msgspec.json.Encoder().encode
# The resources the app serves: a protobuf body is read as the message its kind is served with.
REGISTRY = web.AppKey("registry", Registry)


@dataclass
class Target:
    rt: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None

    @property
    def resource(self) -> str:
        """As the API server's request metrics name it: `pods`, `pods/eviction`."""
        return f"{self.rt.plural}/{self.subresource}" if self.subresource else self.rt.plural


# The request's user, as authenticated (and impersonated), kept on the request for admission webhooks.
USER = web.RequestKey("kubesim.user", User)


def warned(response: web.Response, warnings: list[str]) -> web.Response:
    """Each warning as its own `Warning` header, in the API server's form (code 299, agent "-")."""
    for text in warnings:
        response.headers.add("Warning", f"299 - {json.dumps(text)}")
    return response


def json_response(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=encode(body), status=status, content_type="application/json")


def error_response(error: ApiError) -> web.Response:
    """The Status as the API server writes it: Go's json.Encoder ends it with a newline."""
    return web.Response(
        body=encode(error.status()) + b"\n", status=error.code, content_type="application/json"
    )


def verb(request: web.Request, t: Target) -> str:
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


def wants_table(request: web.Request) -> bool:
    return "as=Table" in request.headers.get("Accept", "")


async def read_body(request: web.Request, *, required: bool = True, allow_list: bool = False) -> Any:
    raw = await request.read()
    if not raw:
        if required:
            raise bad_request("the request body is empty")
        return {}
    if request.content_type == protobuf.CONTENT_TYPE:
        return protobuf.decode(raw, request.app[REGISTRY])
    body = msgspec.json.decode(raw)
    if isinstance(body, list) and allow_list:
        return body
    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object")
    return body
