"""How a sender puts an intent to the trackers, as they take them (`intents.authorization`): the subject
(with `subject`, the pod's namespace's; drains on theirs) and, with `kubernetes`, the sender's
ServiceAccount token as a bearer header, read at each send (a projected token is rotated in place)."""

from __future__ import annotations

from pathlib import Path

from shared.nats import bus


def intent_subject(
    subjects: bus.Subjects, authorization: str, *, namespace: str | None = None, drain: bool = False
) -> str:
    if authorization != "subject":
        return subjects.intent_request
    if drain:
        return subjects.drain_request
    return subjects.intent_request_in(namespace or "")


def bearer(token_file: str | None) -> dict[str, str] | None:
    """The headers carrying the token in `token_file` (none without one); OSError when it cannot be read."""
    if token_file is None:
        return None
    return {"Authorization": f"Bearer {Path(token_file).read_text().strip()}"}
