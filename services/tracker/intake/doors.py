"""Which subject an intent may come in on, by authorization mode (pure).

The doors: the request subject `p.intent.request` (any namespace; a token says who asks), the request
subject of one namespace `p.intent.request.<ns>`, the drain request subject `p.drain.request`, and the
intent stream's `p.intents.<ns>`. A subject that names a namespace is only for that namespace's pods,
in every mode: NATS permissions on such subjects are what scope a publisher. With `subject` authorization
those permissions are all the authorization there is, so the unscoped request subject takes nothing and
drains come only on their own subject.
"""

from __future__ import annotations

from typing import Literal

from shared.nats import bus

Door = Literal["request", "namespaced", "drain", "stream"]
Mode = Literal["kubernetes", "subject", "none"]


def door_of(subjects: bus.Subjects, subject: str) -> tuple[Door, str | None]:
    """Which door a message came through, and the namespace its subject names (if it names one)."""
    if subject == subjects.drain_request:
        return "drain", None
    request = subjects.intent_request + "."
    if subject.startswith(request):
        return "namespaced", subject[len(request) :]
    stream = subjects.all_intents.removesuffix(">")
    if subject.startswith(stream):
        return "stream", subject[len(stream) :]
    return "request", None


def door_refusal(
    subjects: bus.Subjects,
    mode: Mode,
    subject: str,
    *,
    drain: bool,
    pod_namespace: str | None = None,
) -> str | None:
    """Why an intent may not come in on `subject`, or None."""
    door, scope = door_of(subjects, subject)
    if drain:
        if door == "namespaced":
            return f"a drain is no namespace's: send it on {subjects.drain_request}, not on {subject}"
        if mode == "subject" and door != "drain":
            return f"with subject authorization drains are taken only on {subjects.drain_request}"
        return None
    if door == "drain":
        return f"only drains are taken on {subject}; send migrations on {subjects.intent_request}"
    if scope is not None and bus.token(pod_namespace or "") != scope:
        return f"subject {subject} is for pods in namespace {scope}, not in {pod_namespace}"
    if mode == "subject" and door == "request":
        return (
            f"with subject authorization a migration is sent on {subjects.intent_request}.<namespace> "
            f"(here {subjects.intent_request_in(pod_namespace or '')})"
        )
    return None
