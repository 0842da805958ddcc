"""kubesim reads Kubernetes' protobuf envelope and the messages it knows; anything else is refused."""

from __future__ import annotations

import pytest

from kubesim.apiserver import kinds, protobuf
from kubesim.apiserver.errors import ApiError


def field(number: int, value: bytes | int) -> bytes:
    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    return varint(number << 3 | 2) + varint(len(value)) + value


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


SERVED = kinds.registry()


def envelope(api_version: str, kind: str, message: bytes) -> bytes:
    type_meta = field(1, api_version.encode()) + field(2, kind.encode())
    return protobuf.MAGIC + field(1, type_meta) + field(2, message)


def test_a_token_request_decodes_to_its_json_form() -> None:
    meta = field(1, b"podherd-executor") + field(3, b"podherd") + field(11, field(1, b"a") + field(2, b"b"))
    spec = field(1, b"api") + field(1, b"nats") + field(4, 1200)
    body = protobuf.decode(
        envelope("authentication.k8s.io/v1", "TokenRequest", field(1, meta) + field(2, spec)), SERVED
    )
    assert body == {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "metadata": {"name": "podherd-executor", "namespace": "podherd", "labels": {"a": "b"}},
        "spec": {"audiences": ["api", "nats"], "expirationSeconds": 1200},
    }


def test_unknown_kinds_and_foreign_bodies_are_refused() -> None:
    with pytest.raises(ApiError) as unknown:
        protobuf.decode(envelope("v1", "Binding", b""), SERVED)
    assert unknown.value.code == 415
    with pytest.raises(ApiError) as foreign:
        protobuf.decode(b'{"kind": "Pod"}', SERVED)
    assert foreign.value.code == 400
    with pytest.raises(ApiError) as cut:
        protobuf.decode(protobuf.MAGIC + b"\x0a\xff", SERVED)
    assert cut.value.code == 400


def test_a_served_kind_is_read_as_the_message_its_entry_names() -> None:
    meta = field(1, b"team") + field(11, field(1, b"a") + field(2, b"b"))
    body = protobuf.decode(envelope("v1", "Namespace", field(1, meta)), SERVED)
    assert body == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "team", "labels": {"a": "b"}},
    }
    without = kinds.registry(kind for kind in kinds.BUILTIN if kind.kind != "Namespace")
    with pytest.raises(ApiError) as unread:
        protobuf.decode(envelope("v1", "Namespace", field(1, meta)), without)
    assert unread.value.code == 415
