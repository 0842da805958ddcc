"""The Surge strategy's names: how a job asks for it, and the record a surging Deployment carries.

Surge moves a pod of a Deployment that cannot lose a replica (one replica, or a PodDisruptionBudget that
allows no disruption): the old pod is marked the cheapest to delete, the Deployment is scaled up by one, the
new pod takes the job's Reservation and becomes Ready, and the Deployment is scaled back down: its
ReplicaSet removes the cheapest pod, the old one. The Deployment carries the surge's record (the job and the
replica count before it) from before the scale-up until the job has ended, so whichever executor replica
handles the job next restores the count once, and a Deployment someone else scaled meanwhile is handed back
untouched.
"""

from __future__ import annotations

from typing import Final

import msgspec

from shared.api.names import ANNOTATION_STRATEGY, ANNOTATION_SURGE

STRATEGY_SURGE: Final = "Surge"
# Kubernetes' own: the ReplicaSet removes the pod with the lowest cost first (PodDeletionCost).
LOWEST_DELETION_COST: Final = str(-(2**31))


class SurgeRecord(msgspec.Struct, rename="camel", kw_only=True):
    job: str
    job_uid: str
    replicas: int  # spec.replicas before the surge
    restored: bool = False  # scaled back (or handed back): never scaled down again


def is_surge(annotations: dict[str, str] | None) -> bool:
    return (annotations or {}).get(ANNOTATION_STRATEGY) == STRATEGY_SURGE


def record_of(deployment: dict[str, object]) -> SurgeRecord | None:
    meta = deployment.get("metadata")
    annotations = (meta.get("annotations") if isinstance(meta, dict) else None) or {}
    text = annotations.get(ANNOTATION_SURGE)
    if not text:
        return None
    try:
        return msgspec.json.decode(text, type=SurgeRecord)
    except msgspec.DecodeError:
        return None
