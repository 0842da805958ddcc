"""The Kubernetes meta types Podherd's API objects embed (`metav1`, `corev1.ObjectReference`).

Only the fields Podherd reads or writes are declared; unknown fields in objects read from the API server are
ignored (the server owns them, e.g. `managedFields`), while types and enum values are checked strictly.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

import msgspec

from shared.api.intstr import PERCENT_PATTERN
from shared.core.durations import DURATION_PATTERN

# A Go duration string ("5m", "500ms"): a pattern, so a bad value is reported at its own field.
Duration = Annotated[str, msgspec.Meta(pattern=DURATION_PATTERN, examples=["5m", "30s", "500ms"])]
# `intstr.IntOrString` in the form Podherd accepts: a non-negative int or a percentage.
IntOrPercent = Annotated[int, msgspec.Meta(ge=0)] | Annotated[str, msgspec.Meta(pattern=PERCENT_PATTERN)]


class KubeStruct(msgspec.Struct, rename="camel", omit_defaults=True, kw_only=True):
    """Base of every Kubernetes-shaped type: camelCase JSON names, empty fields left out as Go's omitempty."""


class ObjectReference(KubeStruct):
    api_version: str | None = None
    kind: str | None = None
    namespace: str | None = None
    name: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    field_path: str | None = None


class OwnerReference(KubeStruct):
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class LabelSelectorRequirement(KubeStruct):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] | None = None


class LabelSelector(KubeStruct):
    match_labels: dict[str, str] | None = None
    match_expressions: list[LabelSelectorRequirement] | None = None


class Preconditions(KubeStruct):
    uid: str | None = None
    resource_version: str | None = None


class DeleteOptions(KubeStruct):
    api_version: str | None = None
    kind: str | None = None
    grace_period_seconds: Annotated[int, msgspec.Meta(ge=0)] | None = None
    preconditions: Preconditions | None = None
    orphan_dependents: bool | None = None
    propagation_policy: Literal["Orphan", "Background", "Foreground"] | None = None
    dry_run: list[Literal["All"]] | None = None


class ObjectMeta(KubeStruct):
    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: datetime | None = None
    deletion_timestamp: datetime | None = None
    deletion_grace_period_seconds: int | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: list[OwnerReference] | None = None
    finalizers: list[str] | None = None


def controller_of(meta: ObjectMeta) -> OwnerReference | None:
    """The owner reference marked `controller: true`, as `metav1.GetControllerOf` returns it."""
    for ref in meta.owner_references or ():
        if ref.controller:
            return ref
    return None


def parse_time(value: object) -> datetime | None:
    """A Kubernetes timestamp (RFC 3339) from plain JSON; None when absent or not one."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None
