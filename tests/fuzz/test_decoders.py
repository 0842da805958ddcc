"""Fuzzing the real decoders: intents, every NATS message schema, PMJ specs and configuration. Each input is
either accepted (and then usable) or refused with the specific error type that names what is wrong; nothing
else may happen (no other exception, no hang). Together with the intent-subject fuzzing, > 10,000 inputs
(`make fuzz`; `make test` runs about a third of them)."""

from __future__ import annotations

import json
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.api import codec
from shared.api.messages import (
    AuditRecord,
    Command,
    DeadLetter,
    Decision,
    EventHead,
    IntentReply,
    MigrationIntent,
    ObjectEvent,
    PodInfo,
    Report,
)
from shared.api.pmj import PodMigrationJob
from shared.api.validation import validate_pmj
from shared.config.loader import config_from_dict
from shared.config.model import ConfigError
from tests.fuzz import sizes

FAST = settings(
    max_examples=sizes.count(ci=150, full=1700), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
MESSAGES = (MigrationIntent, IntentReply, Decision, Command, Report, AuditRecord, DeadLetter, EventHead)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    st.text(max_size=40),
    st.sampled_from(
        ["", "5m", "-1s", "ReservationFirst", "EvictDirectly", "node-1", "Bad Name", "10%", "x" * 300]
    ),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=5)
    ),
    max_leaves=20,
)
names = st.one_of(st.from_regex(r"[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?", fullmatch=True), st.text(max_size=30))


@st.composite
def intents(draw: st.DrawFn) -> dict[str, Any]:
    """Mostly well-formed intents, each field sometimes missing, mistyped or out of range."""
    intent: dict[str, Any] = {
        "idempotencyKey": draw(st.one_of(st.text(min_size=0, max_size=210), json_values)),
        "pod": draw(st.one_of(st.fixed_dictionaries({"namespace": names, "name": names}), json_values)),
        "requester": draw(st.one_of(st.text(max_size=260), json_values)),
    }
    optional = {
        "targetNode": st.one_of(names, json_values),
        "mode": st.one_of(st.sampled_from(["ReservationFirst", "EvictDirectly", "Fast"]), json_values),
        "ttl": st.one_of(st.sampled_from(["5m", "90s", "1h30m", "-5m", "soon"]), json_values),
        "priority": st.one_of(st.integers(), json_values),
        "reason": st.one_of(st.text(max_size=1100), json_values),
        "paused": st.one_of(st.booleans(), json_values),
        "schemaVersion": st.one_of(st.integers(min_value=-2, max_value=3), json_values),
        draw(st.text(min_size=1, max_size=10)): json_values,
    }
    for key, strategy in optional.items():
        if draw(st.booleans()):
            intent[key] = draw(strategy)
    for key in list(intent):
        if draw(st.integers(0, 9)) == 0:
            del intent[key]
    return intent


def decode_or_refuse(data: bytes, type_: type[Any]) -> Any:
    """The contract of every consumer's decode: a value, or a SchemaError naming a field or the reason."""
    try:
        return codec.decode(data, type_)
    except codec.SchemaError as exc:
        assert exc.reason and str(exc).startswith(f"invalid {type_.__name__}")
        return None
    except ValueError as exc:  # __post_init__ checks (schemaVersion) raise ValueError with the reason
        assert "schemaVersion" in str(exc)
        return None


@FAST
@given(intents())
def test_intents_decode_or_are_refused_with_the_field(intent: dict[str, Any]) -> None:
    decoded = decode_or_refuse(json.dumps(intent).encode(), MigrationIntent)
    if decoded is not None:  # accepted: it round-trips and its constraints hold
        assert codec.decode(codec.encode(decoded), MigrationIntent) == decoded
        assert 1 <= len(decoded.idempotency_key) <= 200 and decoded.pod.name and decoded.pod.namespace


@FAST
@given(st.sampled_from(MESSAGES), json_values)
def test_every_message_schema_refuses_garbage_specifically(type_: type[Any], value: Any) -> None:
    decoded = decode_or_refuse(json.dumps(value).encode(), type_)
    if decoded is not None:  # what a schema accepts survives its own encoding
        assert codec.decode(codec.encode(decoded), type_) == decoded


@FAST
@given(st.sampled_from(MESSAGES), st.binary(max_size=200))
def test_bytes_that_are_not_json_are_refused(type_: type[Any], data: bytes) -> None:
    decode_or_refuse(data, type_)


@FAST
@given(json_values)
def test_object_events_of_any_payload_decode_or_are_refused(obj: Any) -> None:
    event = {"kind": "Pod", "type": "ADDED", "uid": "u", "name": "n", "object": obj}
    decode_or_refuse(json.dumps(event).encode(), ObjectEvent[PodInfo])


@st.composite
def pmjs(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if draw(st.booleans()):
        spec["podRef"] = draw(
            st.one_of(
                st.fixed_dictionaries(
                    {"namespace": names, "name": names},
                    optional={"kind": st.sampled_from(["Pod", "Node", ""]), "uid": st.text(max_size=8)},
                ),
                json_values,
            )
        )
    for key, strategy in {
        "mode": st.sampled_from(["ReservationFirst", "EvictDirectly", "Other"]),
        "ttl": st.sampled_from(["5m", "-1m", "0s", "forever", "1h2m3s"]),
        "paused": st.booleans(),
        "reservationOptions": st.one_of(json_values, st.just({"reservationRef": {"name": ""}})),
        "deleteOptions": json_values,
    }.items():
        if draw(st.booleans()):
            spec[key] = draw(strategy)
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "PodMigrationJob",
        "metadata": {"name": "j", "uid": "u"},
        "spec": spec,
    }


@FAST
@given(pmjs())
def test_pmj_specs_decode_and_validate_or_fail_with_a_reason(document: dict[str, Any]) -> None:
    job = decode_or_refuse(json.dumps(document).encode(), PodMigrationJob)
    if job is None:
        return
    invalid = validate_pmj(job)
    if invalid is not None:
        assert invalid.reason.startswith("Invalid") and invalid.message


config_sections = st.fixed_dictionaries(
    {},
    optional={
        "migrationController": st.dictionaries(
            st.sampled_from(
                [
                    "maxMigratingPerNode",
                    "evictQPS",
                    "evictionPolicy",
                    "defaultJobTTL",
                    "objectLimiters",
                    "maxUnavailablePerWorkload",
                    "skipEvictionGates",
                    "arbitrationArgs",
                    "typo",
                ]
            ),
            json_values,
            max_size=4,
        ),
        "nats": st.dictionaries(
            st.sampled_from(["url", "subjectPrefix", "ackWait", "maxDeliver"]), json_values
        ),
        "redis": st.dictionaries(st.sampled_from(["url", "keyPrefix"]), json_values),
        "watcher": st.dictionaries(st.sampled_from(["kinds", "leaseTTL", "pageSize"]), json_values),
        "http": st.dictionaries(st.sampled_from(["port", "host"]), json_values),
    },
)


@FAST
@given(config_sections)
def test_configuration_loads_or_names_the_key(document: dict[str, Any]) -> None:
    try:
        config = config_from_dict(document)
    except ConfigError as exc:
        assert exc.key is not None and str(exc)
        return
    assert msgspec.convert(msgspec.to_builtins(config), type(config)) == config
