"""A CRD version's `openAPIV3Schema` applied as the API server applies it to a custom resource on write.

The order is the API server's: the request body is decoded and pruned (unknown fields dropped, and
reported as the request's `fieldValidation` asks: `Ignore`, `Warn` or `Strict`), non-nullable nulls without
a default dropped, `default`s filled in, and the result validated against the schema (422 `Invalid`, with
the field errors apiextensions-apiserver derives from kube-openapi's validation). Validation itself is the
`jsonschema` library's (Draft 4, which is what OpenAPI v3.0 schemas are, plus `nullable` and
`x-kubernetes-int-or-string`); the field paths and wording are the API server's.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator, Mapping
from typing import Any, Literal

import jsonschema
from jsonschema import Draft4Validator
from jsonschema.exceptions import ValidationError

from kubesim.apiserver.errors import FieldError, bad_request, go_value, invalid_fields

FieldValidation = Literal["Ignore", "Warn", "Strict"]
FIELD_VALIDATIONS: tuple[FieldValidation, ...] = ("Ignore", "Warn", "Strict")
# ObjectMeta's fields: anything else under a custom resource's `metadata` is unknown.
OBJECT_META = frozenset(
    {
        "name",
        "generateName",
        "namespace",
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    }
)
_TYPE_META = frozenset({"apiVersion", "kind", "metadata"})
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _is_integer(_checker: Any, value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def _nullable_type(
    validator: Any, types: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if instance is None and schema.get("nullable"):
        return
    wanted = [types] if isinstance(types, str) else list(types)
    if not any(validator.is_type(instance, t) for t in wanted):
        yield ValidationError(f"{instance!r} is not of type {wanted}")


_FORMATS = jsonschema.FormatChecker(formats=())
_FORMATS.checks("date-time")(lambda value: not isinstance(value, str) or bool(_RFC3339.match(value)))
_Validator = jsonschema.validators.extend(  # type: ignore[no-untyped-call]
    Draft4Validator,
    validators={"type": _nullable_type},
    type_checker=Draft4Validator.TYPE_CHECKER.redefine("integer", _is_integer),
)


def _for_validation(schema: Any) -> Any:
    """The schema as kube-openapi validates it: int-or-string is the type [integer, string]."""
    if isinstance(schema, list):
        return [_for_validation(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _for_validation(v) for k, v in schema.items() if k not in ("description", "default")}
    if schema.get("x-kubernetes-int-or-string"):
        out["type"] = ["integer", "string"]
        out.pop("anyOf", None)
    return out


def _path(parts: Any) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


class CrdSchema:
    """One served version's structural schema: prune, default and validate a custom resource."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.schema: dict[str, Any] = dict(schema)
        self._validator = _Validator(_for_validation(self.schema), format_checker=_FORMATS)

    # -- decoding ----------------------------------------------------------------------------------------

    def decode(self, obj: dict[str, Any], field_validation: FieldValidation, warnings: list[str]) -> None:
        """Prune `obj` in place and fill in defaults; unknown fields as `field_validation` says."""
        report_unknown(obj, self.prune(obj), field_validation, warnings=warnings)
        self.default(obj)

    def prune(self, obj: dict[str, Any]) -> list[str]:
        """Drop fields the schema does not know (and non-nullable nulls); the unknown ones' paths, sorted."""
        unknown: list[str] = []
        meta = obj.get("metadata")
        if isinstance(meta, dict):
            for key in [k for k in meta if k not in OBJECT_META]:
                unknown.append(f"metadata.{key}")
                del meta[key]
        _prune(obj, self.schema, "", unknown=unknown, root=True)
        _drop_nulls(obj, self.schema)
        return sorted(unknown)

    def default(self, obj: dict[str, Any]) -> None:
        _default(obj, self.schema)

    # -- validation --------------------------------------------------------------------------------------

    def validate(self, obj: Mapping[str, Any]) -> list[FieldError]:
        body = {k: v for k, v in obj.items() if k != "metadata"}
        errors: list[FieldError] = []
        typed: set[str] = set()
        raw = sorted(self._validator.iter_errors(body), key=lambda e: (_path(e.absolute_path), e.validator))
        for error in raw:
            path = _path(error.absolute_path)
            for field_error in _field_errors(error, path):
                if field_error.type == "FieldValueTypeInvalid":
                    typed.add(field_error.field)
                errors.append(field_error)
        # kube-openapi stops at a wrong type: no further errors about the same value.
        return [e for e in errors if e.type == "FieldValueTypeInvalid" or e.field not in typed]


def report_unknown(
    obj: Mapping[str, Any], unknown: list[str], field_validation: FieldValidation, *, warnings: list[str]
) -> None:
    """The fields a decoder dropped, as the request's `fieldValidation` says: a 400 (Strict), a warning
    each (Warn), or nothing (Ignore)."""
    if unknown and field_validation == "Strict":
        kind, version = obj.get("kind", ""), str(obj.get("apiVersion", "")).rpartition("/")[2]
        errors = ", ".join(f'unknown field "{path}"' for path in unknown)
        raise bad_request(
            f'{kind} in version "{version}" cannot be handled as a {kind}: strict decoding error: {errors}'
        )
    if field_validation == "Warn":
        warnings.extend(f'unknown field "{path}"' for path in unknown)


def prune_unknown(obj: dict[str, Any], schema: Mapping[str, Any]) -> list[str]:
    """Drop what `schema` (a whole object's, metadata included) does not know; the paths dropped, sorted."""
    unknown: list[str] = []
    _prune(obj, schema, "", unknown=unknown, root=True)
    return sorted(unknown)


def _field_errors(error: ValidationError, path: str) -> list[FieldError]:
    keyword = str(error.validator)
    wanted: Any = error.validator_value
    value: Any = error.instance
    schema: Mapping[str, Any] = error.schema if isinstance(error.schema, Mapping) else {}
    if keyword == "type":
        types = ",".join([wanted] if isinstance(wanted, str) else wanted)
        if schema.get("x-kubernetes-int-or-string"):
            types = "integer,string"
        actual = _type_name(value)
        return [
            FieldError(
                "FieldValueTypeInvalid", path, actual, f'{path} in body must be of type {types}: "{actual}"'
            )
        ]
    if keyword == "required":
        return _required(path, wanted, value)
    if keyword == "enum":
        supported = ", ".join(json.dumps(v if isinstance(v, str) else json.dumps(v)) for v in wanted)
        return [FieldError("FieldValueNotSupported", path, value, f"supported values: {supported}")]
    if keyword == "maxItems":
        return [FieldError("FieldValueTooMany", path, len(value), f"must have at most {wanted} items")]
    if keyword == "maxProperties":
        return [FieldError("FieldValueTooMany", path, len(value), f"must have at most {wanted} items")]
    if keyword == "maxLength":
        unit = "byte" if wanted == 1 else "bytes"
        return [FieldError("FieldValueTooLong", path, "", f"may not be more than {wanted} {unit}")]
    detail = _kube_openapi_message(keyword, wanted, value, path=path, schema=schema)
    bad = len(value) if keyword in ("minItems", "minProperties") else value
    return [FieldError("FieldValueInvalid", path, bad, detail)]


def _required(path: str, wanted: list[str], value: Any) -> list[FieldError]:
    missing = [name for name in wanted if isinstance(value, dict) and name not in value]
    return [FieldError("FieldValueRequired", f"{path}.{name}" if path else name) for name in missing]


# kube-openapi's messages (validation/errors/schema.go), by the keyword that failed.
_MESSAGES = {
    "pattern": "{where} should match '{wanted}'",
    "minItems": "{where} should have at least {wanted} items",
    "minProperties": "{where} should have at least {wanted} properties",
    "minLength": "{where} should be at least {wanted} chars long",
    "uniqueItems": "{where} shouldn't contain duplicates",
    "multipleOf": "{where} should be a multiple of {number}",
    "anyOf": "{where} must validate at least one schema (anyOf)",
}


def _kube_openapi_message(
    keyword: str, wanted: Any, value: Any, *, path: str, schema: Mapping[str, Any]
) -> str:
    where = f"{path} in body"
    if keyword in _MESSAGES:
        return _MESSAGES[keyword].format(where=where, wanted=wanted, number=go_value(wanted))
    if keyword == "format":
        return f"{where} must be of type {wanted}: {json.dumps(value)}"
    if keyword in ("minimum", "maximum"):
        exclusive = bool(schema.get(f"exclusive{keyword.capitalize()}"))
        relation = "greater than" if keyword == "minimum" else "less than"
        return f"{where} should be {relation}{'' if exclusive else ' or equal to'} {go_value(wanted)}"
    return f"{where} must validate {keyword}"


# -- the structural walks ------------------------------------------------------------------------------


def _prune(
    value: Any,
    schema: Mapping[str, Any] | None,
    path: str,
    *,
    unknown: list[str],
    root: bool = False,
    preserve: bool = False,
) -> None:
    """Drop what `schema` does not know (recording each path), as structural pruning does; under
    `x-kubernetes-preserve-unknown-fields` unknown fields stay, and known ones are still pruned inside."""
    preserve = preserve or bool(schema is not None and schema.get("x-kubernetes-preserve-unknown-fields"))
    if isinstance(value, dict):
        embedded = root or bool((schema or {}).get("x-kubernetes-embedded-resource"))
        for key in list(value):
            if embedded and key in _TYPE_META:
                continue
            child = f"{path}.{key}" if path else key
            child_schema = _child_schema(schema, key) if schema is not None else None
            if child_schema is not None:
                _prune(value[key], child_schema, child, unknown=unknown)
            elif not preserve:
                unknown.append(child)
                del value[key]
    elif isinstance(value, list):
        items = (schema or {}).get("items")
        for index, item in enumerate(value):
            items_schema = items if isinstance(items, dict) else None
            if items_schema is not None or not preserve:
                _prune(item, items_schema, f"{path}[{index}]", unknown=unknown, preserve=preserve)


def _child_schema(schema: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    properties = schema.get("properties") or {}
    if key in properties:
        return properties[key]  # type: ignore[no-any-return]
    additional = schema.get("additionalProperties")
    return additional if isinstance(additional, dict) else None


def _drop_nulls(value: Any, schema: Mapping[str, Any] | None) -> None:
    """Non-nullable nulls without a default are dropped (a default replaces them in `_default`)."""
    if schema is None:
        return
    if isinstance(value, dict):
        for key in list(value):
            child = _child_schema(schema, key)
            if child is None:
                continue
            if value[key] is None and not child.get("nullable") and "default" not in child:
                del value[key]
            else:
                _drop_nulls(value[key], child)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            _drop_nulls(item, schema["items"])


def _default(value: Any, schema: Mapping[str, Any] | None) -> None:
    if schema is None:
        return
    if isinstance(value, dict):
        for key, child in (schema.get("properties") or {}).items():
            if "default" in child and key not in value:
                value[key] = copy.deepcopy(child["default"])
        for key in list(value):
            child = _child_schema(schema, key)
            if child is not None:
                if value[key] is None and not child.get("nullable") and "default" in child:
                    value[key] = copy.deepcopy(child["default"])
                _default(value[key], child)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        items = schema["items"]
        for index, item in enumerate(value):
            if item is None and not items.get("nullable") and "default" in items:
                value[index] = copy.deepcopy(items["default"])
            _default(value[index], items)


def field_validation(query: Mapping[str, str], options_kind: str) -> FieldValidation:
    """The request's `fieldValidation` (the API server's default: `Warn`); another value is refused as the
    API server refuses its Create/Update/PatchOptions."""
    directive = query.get("fieldValidation") or "Warn"
    for known in FIELD_VALIDATIONS:
        if directive == known:
            return known
    supported = ", ".join(f'"{v}"' for v in sorted(FIELD_VALIDATIONS))
    error = FieldError(
        "FieldValueNotSupported", "fieldValidation", directive, f"supported values: {supported}"
    )
    raise invalid_fields(options_kind, "meta.k8s.io", "", errors=[error])
