"""Which eviction policy moves a pod, as Koordinator v1.8.0's evictor interpreter chooses it (pure): the
`koordinator.sh/evict-policy` label of the pod, else of its job, when it names a policy there is; else the
configured `evictionPolicy`. And who asked and why, as its soft eviction records them: the job's
`koordinator.sh/evict-trigger` and `koordinator.sh/evict-reason` annotations."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

LABEL_EVICT_POLICY: Final = "koordinator.sh/evict-policy"
ANNOTATION_EVICT_TRIGGER: Final = "koordinator.sh/evict-trigger"
ANNOTATION_EVICT_REASON: Final = "koordinator.sh/evict-reason"
POLICIES: Final = ("Eviction", "Delete", "SoftEviction")


def effective_policy(pod_labels: Mapping[str, str], job_labels: Mapping[str, str], default: str) -> str:
    """A label naming no policy is passed over, as Koordinator falls back to its default evictor."""
    for labels in (pod_labels, job_labels):
        chosen = labels.get(LABEL_EVICT_POLICY, "")
        if chosen:
            return chosen if chosen in POLICIES else default
    return default


def trigger_and_reason(annotations: Mapping[str, str], job: str) -> tuple[str, str]:
    """(initiator, reason) of a soft eviction: the job's trigger and reason (the reason defaults to the
    trigger, as in Koordinator); where the job names neither, Podherd and the job, not Koordinator's empty
    initiator and "NotSet"."""
    trigger = annotations.get(ANNOTATION_EVICT_TRIGGER, "")
    reason = annotations.get(ANNOTATION_EVICT_REASON, "") or trigger
    return trigger or "podherd", reason or f"migration job {job}"
