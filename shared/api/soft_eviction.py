"""The value of the `scheduling.koordinator.sh/soft-eviction` annotation: Koordinator's `SoftEvictionSpec`
(apis/extension), field for field, so a component that honours soft evictions reads who asked, when and why.

`timestamp` is a `metav1.Time`, which marshals as RFC 3339 in UTC with whole seconds; every field is
`omitempty`, so an empty one is left out rather than written empty.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec

INITIATOR = "podherd"


class SoftEvictionSpec(msgspec.Struct, omit_defaults=True, rename="camel", forbid_unknown_fields=True):
    timestamp: str | None = None
    delete_options: dict[str, Any] | None = None
    initiator: str = ""
    reason: str = ""


def metav1_time(moment: datetime) -> str:
    """As `metav1.Time` writes it: RFC 3339, UTC, seconds."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def soft_eviction(
    moment: datetime, reason: str, delete_options: dict[str, Any] | None, *, initiator: str = INITIATOR
) -> str:
    spec = SoftEvictionSpec(
        timestamp=metav1_time(moment),
        delete_options=delete_options or None,
        initiator=initiator,
        reason=reason,
    )
    return msgspec.json.encode(spec).decode()
