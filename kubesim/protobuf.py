"""Request bodies in Kubernetes' protobuf encoding, which kubectl sends for built-in types.

The envelope (k8s.io/apimachinery runtime/serializer/protobuf) is the magic `k8s\\0` and a
`runtime.Unknown`: TypeMeta (1: apiVersion, 2: kind) and the object's own message in field 2. Messages are
decoded by field number with the schemas below, taken from k8s.io/api's `generated.proto`; a type without
a schema is refused 415, as for any body kubesim cannot read.
"""

from __future__ import annotations

from typing import Any

from kubesim.errors import bad_request, unsupported_media_type

MAGIC = b"k8s\x00"
CONTENT_TYPE = "application/vnd.kubernetes.protobuf"

# A message schema: field number -> (JSON name, kind, nested schema). Kinds: "string", "bool", "int",
# "message", "map" (map<string,string>), "strings" (repeated string).
Schema = dict[int, tuple[str, str, "Schema | None"]]

OBJECT_META: Schema = {
    1: ("name", "string", None),
    2: ("generateName", "string", None),
    3: ("namespace", "string", None),
    11: ("labels", "map", None),
    12: ("annotations", "map", None),
}
RESOURCE_ATTRIBUTES: Schema = {
    1: ("namespace", "string", None),
    2: ("verb", "string", None),
    3: ("group", "string", None),
    4: ("version", "string", None),
    5: ("resource", "string", None),
    6: ("subresource", "string", None),
    7: ("name", "string", None),
}
NON_RESOURCE_ATTRIBUTES: Schema = {1: ("path", "string", None), 2: ("verb", "string", None)}
KINDS: dict[tuple[str, str], Schema] = {
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"): {
        1: ("metadata", "message", OBJECT_META),
        2: (
            "spec",
            "message",
            {
                1: ("resourceAttributes", "message", RESOURCE_ATTRIBUTES),
                2: ("nonResourceAttributes", "message", NON_RESOURCE_ATTRIBUTES),
            },
        ),
    },
    ("authentication.k8s.io/v1", "TokenRequest"): {
        1: ("metadata", "message", OBJECT_META),
        2: (
            "spec",
            "message",
            {1: ("audiences", "strings", None), 4: ("expirationSeconds", "int", None)},
        ),
    },
    ("authentication.k8s.io/v1", "SelfSubjectReview"): {1: ("metadata", "message", OBJECT_META)},
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview"): {
        1: ("metadata", "message", OBJECT_META),
        2: ("spec", "message", {1: ("namespace", "string", None)}),
    },
}


def decode(body: bytes) -> dict[str, Any]:
    """A protobuf request body as the JSON object it stands for."""
    if not body.startswith(MAGIC):
        raise bad_request("the protobuf body does not start with the Kubernetes magic number")
    envelope = _fields(body[len(MAGIC) :])
    type_meta = _fields(envelope.get(1, [b""])[0])
    api_version = type_meta.get(1, [b""])[0].decode()
    kind = type_meta.get(2, [b""])[0].decode()
    schema = KINDS.get((api_version, kind))
    if schema is None:
        raise unsupported_media_type(f"{CONTENT_TYPE} for {kind or 'an unknown kind'}")
    return {"apiVersion": api_version, "kind": kind, **_message(envelope.get(2, [b""])[0], schema)}


def _message(data: bytes, schema: Schema) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for number, values in _fields(data).items():
        if number not in schema:
            continue
        name, kind, nested = schema[number]
        if kind == "string":
            out[name] = bytes(values[-1]).decode()
        elif kind == "bool":
            out[name] = bool(values[-1])
        elif kind == "int":
            out[name] = int(values[-1])
        elif kind == "strings":
            out[name] = [bytes(v).decode() for v in values]
        elif kind == "map":
            entries = [_fields(bytes(v)) for v in values]
            out[name] = {e.get(1, [b""])[0].decode(): e.get(2, [b""])[0].decode() for e in entries}
        elif kind == "message" and nested is not None:
            out[name] = _message(bytes(values[-1]), nested)
    return out


def _fields(data: bytes) -> dict[int, list[Any]]:
    """The wire format: each field number with its values (varints as ints, length-delimited as bytes)."""
    fields: dict[int, list[Any]] = {}
    position = 0
    while position < len(data):
        key, position = _varint(data, position)
        number, wire = key >> 3, key & 7
        value: Any
        if wire == 0:
            value, position = _varint(data, position)
        elif wire == 2:
            length, position = _varint(data, position)
            value, position = data[position : position + length], position + length
        elif wire == 1:
            value, position = data[position : position + 8], position + 8
        elif wire == 5:
            value, position = data[position : position + 4], position + 4
        else:
            raise bad_request(f"the protobuf body has an unknown wire type {wire}")
        fields.setdefault(number, []).append(value)
    return fields


def _varint(data: bytes, position: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if position >= len(data):
            raise bad_request("the protobuf body ends inside a varint")
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, position
        shift += 7
