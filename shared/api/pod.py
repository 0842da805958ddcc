"""A pod as the executor reads it from the API server: its identity, owners and phase typed, its spec kept
as the API server wrote it (a Reservation's template copies it field for field, fields Podherd does not
know included)."""

from __future__ import annotations

from typing import Any

import msgspec

from shared.api.meta import KubeStruct, ObjectMeta


class PodStatus(KubeStruct):
    phase: str | None = None


class Pod(KubeStruct):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: dict[str, Any] = msgspec.field(default_factory=dict)
    status: PodStatus = msgspec.field(default_factory=PodStatus)

    @property
    def node_name(self) -> str | None:
        node = self.spec.get("nodeName")
        return str(node) if node else None

    @property
    def unscheduled(self) -> bool:
        """Not bound to a node and not running: a Pending pod the scheduler has not placed."""
        return self.node_name is None and self.status.phase in (None, "Pending")


def pod_from(raw: dict[str, Any]) -> Pod:
    return msgspec.convert(raw, Pod)
