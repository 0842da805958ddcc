"""Strict JSON decoding that reports which field was wrong.

Every consumer decodes through `decode`: a message of the wrong shape raises `SchemaError`, whose `field`
is the dotted path of the offending field (`spec.mode`, `pod.name`), so a dead-lettered message and an
intent's error reply both say exactly what to fix.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

import msgspec

T = TypeVar("T")

_AT = re.compile(r"^(?P<msg>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.S)
_MISSING = re.compile(r"missing required field `(?P<name>[^`]+)`")
_UNKNOWN = re.compile(r"unknown field `(?P<name>[^`]+)`")

_encoder = msgspec.json.Encoder()
# A decoder per type, made once: decoding with a ready Decoder skips the type's lookup on every call.
_decoders: dict[type, msgspec.json.Decoder[Any]] = {}


class SchemaError(ValueError):
    """A message or object that does not match its schema; `field` names the offending field."""

    def __init__(self, type_name: str, field: str, reason: str) -> None:
        self.type_name = type_name
        self.field = field
        self.reason = reason
        where = f" at `{field}`" if field else ""
        super().__init__(f"invalid {type_name}{where}: {reason}")


def error_location(error_text: str) -> tuple[str, str]:
    """Split a msgspec validation message into (dotted field path, reason)."""
    match = _AT.match(error_text)
    message = match.group("msg") if match else error_text
    path = (match.group("path") if match else "") or ""
    path = path.lstrip(".")
    named = _MISSING.search(message) or _UNKNOWN.search(message)
    if named:
        path = f"{path}.{named.group('name')}" if path else named.group("name")
    return path, message


def decode(data: bytes | str, type_: type[T]) -> T:
    """Decode JSON into `type_` strictly; raise `SchemaError` naming the field on any mismatch."""
    decoder = _decoders.get(type_)
    if decoder is None:
        decoder = _decoders[type_] = msgspec.json.Decoder(type_)
    try:
        return decoder.decode(data)  # type: ignore[no-any-return]
    except msgspec.ValidationError as exc:
        field, reason = error_location(str(exc))
        raise SchemaError(type_.__name__, field, reason) from exc
    except msgspec.DecodeError as exc:
        raise SchemaError(type_.__name__, "", f"not valid JSON: {exc}") from exc


def convert(obj: Any, type_: type[T]) -> T:
    """Like `decode`, for already-parsed data (YAML documents, Python dicts from the Kubernetes client)."""
    try:
        return msgspec.convert(obj, type=type_)
    except msgspec.ValidationError as exc:
        field, reason = error_location(str(exc))
        raise SchemaError(type_.__name__, field, reason) from exc


def encode(obj: Any) -> bytes:
    return _encoder.encode(obj)


def to_builtins(obj: Any) -> Any:
    """Plain dicts and lists, as the Kubernetes client's dynamic and custom-object APIs take them."""
    return msgspec.to_builtins(obj)
