"""Kubernetes `Status` error bodies with the codes and reasons the API server uses."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


class ApiError(Exception):
    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        *,
        details: dict[str, Any] | None = None,
        list_meta: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.list_meta = list_meta or {}  # a Status's ListMeta, e.g. a fresh `continue` token

    def status(self) -> dict[str, Any]:
        # metav1.Status's fields in their Go order, as the API server's encoder writes them.
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": dict(self.list_meta),
            "status": "Failure",
            "message": self.message,
        }
        if self.reason:  # `omitempty`: a webhook's denial may carry none
            body["reason"] = self.reason
        if self.details is not None:
            body["details"] = self.details
        body["code"] = self.code
        return body


def _details(kind: str | None, name: str | None, group: str | None) -> dict[str, Any] | None:
    details = {k: v for k, v in (("name", name), ("group", group), ("kind", kind)) if v}
    return details or None


def not_found(resource: str, name: str, group: str = "") -> ApiError:
    qualified = f"{resource}.{group}" if group else resource
    return ApiError(
        404, "NotFound", f'{qualified} "{name}" not found', details=_details(resource, name, group)
    )


def already_exists(resource: str, name: str, group: str = "") -> ApiError:
    qualified = f"{resource}.{group}" if group else resource
    return ApiError(
        409, "AlreadyExists", f'{qualified} "{name}" already exists', details=_details(resource, name, group)
    )


def conflict(resource: str, name: str, why: str, *, group: str = "") -> ApiError:
    qualified = f"{resource}.{group}" if group else resource
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified} "{name}": {why}',
        details=_details(resource, name, group),
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def invalid(kind: str, name: str, message: str, *, field: str | None = None) -> ApiError:
    details: dict[str, Any] = {"name": name, "kind": kind}
    if field:
        details["causes"] = [{"reason": "FieldValueInvalid", "message": message, "field": field}]
    return ApiError(422, "Invalid", f'{kind} "{name}" is invalid: {message}', details=details)


def gone(message: str, continue_token: str | None = None) -> ApiError:
    return ApiError(
        410, "Expired", message, list_meta={"continue": continue_token} if continue_token else None
    )


def too_many_requests(message: str, causes: list[dict[str, str]] | None = None) -> ApiError:
    details: dict[str, Any] | None = {"causes": causes} if causes else None
    return ApiError(429, "TooManyRequests", message, details=details)


def method_not_allowed(message: str) -> ApiError:
    return ApiError(405, "MethodNotAllowed", message)


def unsupported_media_type(content_type: str) -> ApiError:
    return ApiError(
        415, "UnsupportedMediaType", f"the body of the request was in an unknown format - {content_type}"
    )


def forbidden(message: str) -> ApiError:
    return ApiError(403, "Forbidden", message)


def forbidden_resource(
    resource: str, group: str, name: str, *, why: str, cause: dict[str, str] | None = None
) -> ApiError:
    """`errors.NewForbidden` for a resource (what admission plugins refuse with)."""
    qualified = f"{resource}.{group}" if group else resource
    message = f'{qualified} "{name}" is forbidden: {why}' if name else f"{qualified} is forbidden: {why}"
    details: dict[str, Any] = {k: v for k, v in (("name", name), ("group", group), ("kind", resource)) if v}
    if cause:
        details["causes"] = [cause]
    return ApiError(403, "Forbidden", message, details=details)


@dataclass(frozen=True)
class FieldError:
    """One of apimachinery's `field.Error`s: its type, field path, bad value and detail."""

    type: str  # the cause reason: FieldValueInvalid, FieldValueRequired, ...
    field: str
    value: Any = None
    detail: str = ""

    _WORDS = {
        "FieldValueRequired": "Required value",
        "FieldValueInvalid": "Invalid value",
        "FieldValueTypeInvalid": "Invalid value",
        "FieldValueNotSupported": "Unsupported value",
        "FieldValueDuplicate": "Duplicate value",
        "FieldValueTooMany": "Too many",
        "FieldValueTooLong": "Too long",
        "FieldValueForbidden": "Forbidden",
    }
    _NO_VALUE = frozenset({"FieldValueRequired", "FieldValueTooLong", "FieldValueForbidden"})

    def body(self) -> str:
        words = self._WORDS[self.type]
        text = words if self.type in self._NO_VALUE else f"{words}: {go_value(self.value)}"
        return f"{text}: {self.detail}" if self.detail else text

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"


class GoLiteral(str):
    """A bad value printed as given: how Go prints a value JSON has no type for (`0x0`, a uint64 zero)."""


def go_value(value: Any) -> str:
    """A bad value as Go's `%v`/`%q` prints it in a field error (composites as JSON: close, not exact)."""
    if isinstance(value, GoLiteral):
        return str(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, int | float):
        return repr(value) if isinstance(value, float) and not value.is_integer() else str(int(value))
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def not_supported(field: str, value: Any, choices: tuple[str, ...]) -> FieldError:
    """`field.NotSupported`: the value is none of `choices`, listed in the order given."""
    detail = "supported values: " + ", ".join(f'"{v}"' for v in choices)
    return FieldError("FieldValueNotSupported", field, value, detail)


def invalid_fields(kind: str, group: str, name: str, *, errors: list[FieldError]) -> ApiError:
    """The 422 `Invalid` Status the API server builds from field errors (`errors.NewInvalid`)."""
    messages: list[str] = []
    for error in errors:
        if str(error) not in messages:
            messages.append(str(error))
    aggregate = messages[0] if len(messages) == 1 else "[" + ", ".join(messages) + "]"
    qualified = f"{kind}.{group}" if group else kind
    details: dict[str, Any] = {"name": name, **({"group": group} if group else {}), "kind": kind}
    details["causes"] = [{"reason": e.type, "message": e.body(), "field": e.field} for e in errors]
    return ApiError(422, "Invalid", f'{qualified} "{name}" is invalid: {aggregate}', details=details)


def internal_error(exc: BaseException) -> ApiError:
    """apimachinery's NewInternalError: what the API server answers for an error it did not expect."""
    why = str(exc) or type(exc).__name__
    return ApiError(
        500, "InternalError", f"Internal error occurred: {why}", details={"causes": [{"message": why}]}
    )
