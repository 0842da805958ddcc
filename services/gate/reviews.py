"""AdmissionReview v1 as the gate reads and answers it (pure): the request's parts the gate uses, and the
response envelopes (allowed, with warnings; denied, with the code and message the API server passes on)."""

from __future__ import annotations

from typing import Any

import msgspec

from shared.access.permissions import Identity

API_VERSION = "admission.k8s.io/v1"
# The HTTP reason each code the gate answers with is known by (a Status's `reason`).
REASONS = {403: "Forbidden", 404: "NotFound", 409: "Conflict", 422: "Invalid", 429: "TooManyRequests"}


class UserInfo(msgspec.Struct, kw_only=True):
    username: str = ""
    uid: str = ""
    groups: list[str] = msgspec.field(default_factory=list)
    extra: dict[str, list[str]] = msgspec.field(default_factory=dict)

    @property
    def identity(self) -> Identity:
        return Identity(username=self.username, uid=self.uid, groups=tuple(self.groups), extra=self.extra)


class Request(msgspec.Struct, rename="camel", kw_only=True):
    uid: str
    operation: str = ""
    name: str = ""
    namespace: str = ""
    sub_resource: str = ""
    user_info: UserInfo = msgspec.field(default_factory=UserInfo)
    object: dict[str, Any] | None = None
    old_object: dict[str, Any] | None = None
    dry_run: bool = False


class Review(msgspec.Struct, kw_only=True):
    api_version: str = msgspec.field(default="", name="apiVersion")
    kind: str = ""
    request: Request | None = None


class Refusal(msgspec.Struct, frozen=True):
    code: int
    message: str


def read_review(body: bytes) -> Request:
    """The review's request; ValueError when the body is not an AdmissionReview v1 with one."""
    try:
        review = msgspec.json.decode(body, type=Review)
    except msgspec.DecodeError as exc:
        raise ValueError(f"not an AdmissionReview: {exc}") from exc
    if review.api_version != API_VERSION or review.kind != "AdmissionReview" or review.request is None:
        raise ValueError(f"not an {API_VERSION} AdmissionReview request")
    return review.request


def answer(
    uid: str, refusal: Refusal | None = None, warnings: tuple[str, ...] = (), *, patch: str | None = None
) -> bytes:
    """`patch`: a mutating webhook's JSONPatch, base64-encoded."""
    response: dict[str, Any] = {"uid": uid, "allowed": refusal is None}
    if patch is not None and refusal is None:
        response.update(patchType="JSONPatch", patch=patch)
    if refusal is not None:
        response["status"] = {
            "status": "Failure",
            "code": refusal.code,
            "reason": REASONS.get(refusal.code, ""),
            "message": refusal.message,
        }
    if warnings:
        response["warnings"] = list(warnings)
    return msgspec.json.encode({"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response})
