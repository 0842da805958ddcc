"""kubesim's structural-schema walks: pruning, nulls, defaults, and the field errors' wording."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.apiserver.errors import ApiError, FieldError, GoLiteral, go_value
from kubesim.apiserver.schema import CrdSchema

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "size": {"type": "integer", "default": 3},
                "note": {"type": "string", "nullable": True},
                "name": {"type": "string"},
                "items": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "key": {"type": "string"},
                            "weight": {"type": "integer", "default": 1},
                        },
                    },
                },
                "free": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": True,
                    "properties": {"fixed": {"type": "object", "properties": {"a": {"type": "string"}}}},
                },
                "amounts": {
                    "type": "object",
                    "additionalProperties": {
                        "anyOf": [{"type": "integer"}, {"type": "string"}],
                        "x-kubernetes-int-or-string": True,
                        "pattern": "^[0-9]+m?$",
                    },
                },
            },
        }
    },
}


def test_pruning_reports_every_unknown_path_sorted_and_keeps_what_is_preserved() -> None:
    obj: dict[str, Any] = {
        "apiVersion": "x/v1",
        "kind": "X",
        "metadata": {"name": "a", "bogus": 1},
        "extra": True,
        "spec": {
            "items": [{"key": "k", "junk": 1}, {"other": 2}],
            "free": {"anything": {"deep": 1}, "fixed": {"a": "x", "b": "y"}},
            "amounts": {"cpu": "100m"},
        },
    }
    unknown = CrdSchema(SCHEMA).prune(obj)
    assert unknown == [
        "extra",
        "metadata.bogus",
        "spec.free.fixed.b",
        "spec.items[0].junk",
        "spec.items[1].other",
    ]
    assert obj["spec"]["items"] == [{"key": "k"}, {}]
    assert obj["spec"]["free"] == {"anything": {"deep": 1}, "fixed": {"a": "x"}}
    assert obj["metadata"] == {"name": "a"} and obj["kind"] == "X"


def test_nulls_are_dropped_unless_nullable_and_defaults_fill_missing_and_null_values() -> None:
    obj: dict[str, Any] = {"spec": {"name": None, "note": None, "size": None, "items": [{"key": "k"}]}}
    schema = CrdSchema(SCHEMA)
    schema.prune(obj)
    schema.default(obj)
    assert obj == {"spec": {"note": None, "size": 3, "items": [{"key": "k", "weight": 1}]}}


def test_int_or_string_takes_either_and_checks_the_pattern_on_strings() -> None:
    schema = CrdSchema(SCHEMA)
    assert schema.validate({"spec": {"amounts": {"a": 5, "b": "250m"}}}) == []
    errors = schema.validate({"spec": {"amounts": {"c": "lots", "d": True}}})
    assert [str(e) for e in errors] == [
        "spec.amounts.c: Invalid value: \"lots\": spec.amounts.c in body should match '^[0-9]+m?$'",
        'spec.amounts.d: Invalid value: "boolean": spec.amounts.d in body must be of type integer,string:'
        ' "boolean"',
    ]


def test_a_value_of_the_wrong_type_gets_one_error() -> None:
    schema = CrdSchema(
        {"type": "object", "properties": {"n": {"type": "string", "enum": ["a"], "pattern": "a"}}}
    )
    assert [e.type for e in schema.validate({"n": 5})] == ["FieldValueTypeInvalid"]


@pytest.mark.parametrize(
    ("value", "printed"),
    [(None, "null"), (True, "true"), (5, "5"), (1.5, "1.5"), ('a"b', '"a\\"b"'), (GoLiteral("0x0"), "0x0")],
)
def test_bad_values_print_as_go_prints_them(value: object, printed: str) -> None:
    assert go_value(value) == printed


def test_field_errors_render_with_and_without_a_value() -> None:
    assert str(FieldError("FieldValueRequired", "spec.podRef")) == "spec.podRef: Required value"
    too_many = FieldError("FieldValueTooMany", "spec.x", 3, "must have at most 2 items")
    assert str(too_many) == "spec.x: Too many: 3: must have at most 2 items"


def test_strict_decoding_names_every_unknown_field() -> None:
    obj = {"apiVersion": "g/v1", "kind": "X", "spec": {"a": 1, "b": 2}}
    with pytest.raises(ApiError) as caught:
        CrdSchema({"type": "object", "properties": {"spec": {"type": "object"}}}).decode(obj, "Strict", [])
    assert caught.value.code == 400
    assert caught.value.message.endswith(
        'strict decoding error: unknown field "spec.a", unknown field "spec.b"'
    )
