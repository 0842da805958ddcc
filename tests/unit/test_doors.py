"""Who must hold what (pure): the permissions each request needs, the subjects each mode takes intents on,
and credentials kept out of what is printed."""

from __future__ import annotations

import pytest

from services.tracker.intake.doors import door_of, door_refusal
from shared.access.permissions import drain_node_needs, drain_pod_needs, migration_needs
from shared.core.redact import masked, redacted, without_credentials
from shared.nats import bus

S = bus.Subjects("podherd")


def test_a_migration_needs_an_eviction_and_a_target_node_a_binding() -> None:
    assert [str(n) for n in migration_needs("team-x", "app", target_node=False)] == [
        "create pods/eviction app in namespace team-x"
    ]
    assert [str(n) for n in migration_needs("team-x", "app", target_node=True)][1] == (
        "create pods/binding app in namespace team-x"
    )


def test_a_drain_needs_the_node_then_each_namespace_it_moves_from() -> None:
    assert [str(n) for n in drain_node_needs("node-1")] == ["patch nodes node-1", "list pods"]
    assert [str(n) for n in drain_pod_needs(["b", "a", "b"], deletes=False)] == [
        "create pods/eviction in namespace a",
        "create pods/eviction in namespace b",
    ]
    assert [str(n) for n in drain_pod_needs(["a"], deletes=True)] == ["delete pods in namespace a"]


@pytest.mark.parametrize(
    ("subject", "door", "scope"),
    [
        ("podherd.intent.request", "request", None),
        ("podherd.intent.request.team-x", "namespaced", "team-x"),
        ("podherd.drain.request", "drain", None),
        ("podherd.intents.team-x", "stream", "team-x"),
    ],
)
def test_each_subject_is_one_door(subject: str, door: str, scope: str | None) -> None:
    assert door_of(S, subject) == (door, scope)


@pytest.mark.parametrize(
    ("mode", "subject", "drain", "namespace", "refused"),
    [
        ("kubernetes", "podherd.intent.request", False, "a", None),
        ("kubernetes", "podherd.intent.request", True, None, None),
        ("kubernetes", "podherd.intent.request.a", False, "a", None),
        ("kubernetes", "podherd.intent.request.a", False, "b", "is for pods in namespace a, not in b"),
        ("none", "podherd.intents.a", False, "b", "is for pods in namespace a, not in b"),
        ("none", "podherd.intent.request.a", True, None, "a drain is no namespace's"),
        ("none", "podherd.drain.request", False, "a", "only drains are taken"),
        ("subject", "podherd.intent.request", False, "a", "podherd.intent.request.a"),
        ("subject", "podherd.intent.request", True, None, "drains are taken only on podherd.drain.request"),
        ("subject", "podherd.drain.request", True, None, None),
        ("subject", "podherd.intents.a", False, "a", None),
    ],
)
def test_which_door_takes_what(
    mode: str, subject: str, drain: bool, namespace: str | None, refused: str | None
) -> None:
    why = door_refusal(S, mode, subject, drain=drain, pod_namespace=namespace)  # type: ignore[arg-type]
    assert why is None if refused is None else (why is not None and refused in why), why


def test_credentials_never_leave_a_url() -> None:
    text = "cannot reach redis://podherd:s3cret@redis:6379/0 nor nats://tok@nats:4222"
    assert without_credentials(text) == "cannot reach redis://redis:6379/0 nor nats://nats:4222"
    assert masked("rediss://default:s3cret@r:6380") == "rediss://default:***@r:6380"
    assert masked("nats://a-token@n:4222") == "nats://***@n:4222"  # NATS token authentication
    assert masked("redis://someone@r:6379") == "redis://someone@r:6379"  # a user, no password
    assert redacted({"a": ["redis://u:p@h"], "b": 1}) == {"a": ["redis://u:***@h"], "b": 1}
