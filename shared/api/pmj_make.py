"""A PodMigrationJob Podherd makes (pure): labelled as managed by it."""

from __future__ import annotations

from typing import Final

from shared.api.meta import ObjectMeta
from shared.api.pmj import API_VERSION, KIND, PodMigrationJob, PodMigrationJobSpec

LABEL_MANAGED_BY: Final = "app.kubernetes.io/managed-by"


def new_job(
    name: str, spec: PodMigrationJobSpec, *, annotations: dict[str, str], labels: dict[str, str] | None = None
) -> PodMigrationJob:
    return PodMigrationJob(
        api_version=API_VERSION,
        kind=KIND,
        metadata=ObjectMeta(
            name=name, labels={LABEL_MANAGED_BY: "podherd", **(labels or {})}, annotations=annotations
        ),
        spec=spec,
    )
