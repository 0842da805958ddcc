"""What an eviction's refusal means, read as the descheduler reads it (KEP-1397).

An eviction in the background is answered 429 by whoever evacuates the pod, in real clusters an admission
webhook (KubeVirt's), whose message the API server wraps: `admission webhook "<name>" denied the request:
Eviction triggered evacuation of VMI "<ns>/<name>"`, or `... Evacuation in progress: Eviction triggered ...`
when asked again. So, as the descheduler does: a 429 is an eviction in the background only for a pod
annotated `request-evict-only` and only when its message contains "Eviction triggered evacuation" anywhere;
a 429 whose causes name a DisruptionBudget is always the budget's refusal; every other 429 is a refusal to
retry later; any other error fails this attempt.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Literal

from shared.api import annotations as known

EVACUATION_TEXT = "Eviction triggered evacuation"
DISRUPTION_BUDGET_CAUSE = "DisruptionBudget"
Refusal = Literal["background", "blocked", "failed"]


def refusal(status: int, message: str, causes: Collection[str], *, annotations: Mapping[str, str]) -> Refusal:
    if status != 429:
        return "failed"
    if DISRUPTION_BUDGET_CAUSE in causes:
        return "blocked"
    if known.REQUEST_EVICT_ONLY in annotations and EVACUATION_TEXT in message:
        return "background"
    return "blocked"
