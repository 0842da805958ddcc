"""The JSON types of a built-in object's fields, checked as the API server's decoder checks them: a value
of the wrong type ends the request `400`, `<Kind> in version "<v>" cannot be handled as a <Kind>: json:
cannot unmarshal <what> into Go struct field <Struct>.<path> of type <type>`, as encoding/json words it.
Quantities and int-or-strings take a string or a number; `null` is every type's zero value."""

from __future__ import annotations

from typing import Any

from kubesim.apiserver.builtin_openapi import GO_TYPE
from kubesim.apiserver.errors import bad_request
from kubesim.apiserver.records import Obj

# Types with their own decoders, which take a string or a number.
SCALARS = frozenset({"resource.Quantity", "intstr.IntOrString"})
GO_SCALARS = {("integer", "int32"): "int32", ("integer", "int64"): "int64", ("number", "double"): "float64"}


def check(obj: Obj, schema: Obj, *, kind: str, version: str) -> None:
    """Raise the decoder's 400 for the first field of `obj` whose value `schema` says is of another type."""
    found = _mismatch(obj, schema, path=(), struct=schema.get(GO_TYPE, kind))
    if found is not None:
        what, struct, path, go_type = found
        raise bad_request(
            f'{kind} in version "{version}" cannot be handled as a {kind}: json: cannot unmarshal {what} '
            f"into Go struct field {struct.rpartition('.')[2]}.{'.'.join(path)} of type {go_type}"
        )


Mismatch = tuple[str, str, tuple[str, ...], str]  # what was given, the struct, the field's path, its Go type


def _mismatch(value: Any, schema: Obj, *, path: tuple[str, ...], struct: str) -> Mismatch | None:
    if value is None or schema.get("x-kubernetes-preserve-unknown-fields"):
        return None
    if schema.get("x-kubernetes-int-or-string") or schema.get(GO_TYPE) in SCALARS:
        bad = not isinstance(value, str | int | float) or isinstance(value, bool)
        return (_what(value, None), struct, path, _go_type(schema)) if bad and path else None
    wanted = schema.get("type")
    if wanted and not _is(value, wanted) and path:
        return _what(value, wanted), struct, path, _go_type(schema)
    if isinstance(value, dict):
        inner = schema.get(GO_TYPE, struct)
        props, extra = schema.get("properties") or {}, schema.get("additionalProperties")
        for key, child in value.items():
            sub = props.get(key) if key in props else (extra if isinstance(extra, dict) else None)
            where = (*path, key) if key in props else path  # a map's keys are not in Go's field path
            if sub is not None and (found := _mismatch(child, sub, path=where, struct=inner)):
                return found
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            if found := _mismatch(item, schema["items"], path=path, struct=struct):
                return found
    return None


def _is(value: Any, wanted: str) -> bool:
    if wanted == "string":
        return isinstance(value, str)
    if wanted == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if wanted == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if wanted == "boolean":
        return isinstance(value, bool)
    if wanted == "array":
        return isinstance(value, list)
    if wanted == "object":
        return isinstance(value, dict)
    return True


def _what(value: Any, wanted: str | None) -> str:
    """The JSON value as encoding/json names it in the error (a fraction meant for an integer in full)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, float) and wanted == "integer":
        return f"number {value!r}"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _go_type(schema: Obj) -> str:
    if GO_TYPE in schema:
        return str(schema[GO_TYPE])
    wanted, fmt = str(schema.get("type") or ""), str(schema.get("format") or "")
    if (wanted, fmt) in GO_SCALARS:
        return GO_SCALARS[(wanted, fmt)]
    if wanted == "array":
        return "[]" + _go_type(schema.get("items") or {})
    if wanted == "object" or "additionalProperties" in schema:
        return "map[string]" + _go_type(schema.get("additionalProperties") or {"type": "string"})
    simple = {"string": "string", "integer": "int", "number": "float64", "boolean": "bool"}
    return simple.get(wanted, "interface {}")
