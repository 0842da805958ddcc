"""An eviction's refusal read as the descheduler reads it: in the background only for a request-evict-only
pod whose 429 says "Eviction triggered evacuation" (anywhere: the API server wraps a webhook's message); a
DisruptionBudget cause is always the budget's refusal."""

from __future__ import annotations

import pytest

from services.executor.refusals import refusal

ONLY = {"descheduler.alpha.kubernetes.io/request-evict-only": ""}
WRAPPED = (
    'admission webhook "virt-launcher-eviction-interceptor.kubevirt.io" denied the request: '
    'Eviction triggered evacuation of VMI "ns/vm"'
)
AGAIN = WRAPPED.replace("request: ", "request: Evacuation in progress: ")
BUDGET = (
    "Cannot evict pod as it would violate the pod's disruption budget.; The disruption budget pdb needs 2"
)


@pytest.mark.parametrize(
    ("status", "message", "causes", "annotations", "meant"),
    [
        (429, WRAPPED, (), ONLY, "background"),
        (429, AGAIN, (), ONLY, "background"),
        (429, 'Eviction triggered evacuation of VMI "ns/vm"', (), ONLY, "background"),  # unwrapped
        (429, WRAPPED, (), {}, "blocked"),  # not asked to be evicted only: a refusal, as the descheduler says
        (429, "Eviction triggered: something else", (), ONLY, "blocked"),  # not an evacuation
        (429, BUDGET, ("DisruptionBudget",), ONLY, "blocked"),
        (429, WRAPPED, ("DisruptionBudget",), ONLY, "blocked"),  # a budget's cause always wins
        (429, "too many requests, retry later", (), {}, "blocked"),
        (500, WRAPPED, (), ONLY, "failed"),
        (403, "forbidden", (), {}, "failed"),
    ],
)
def test_refusals(
    status: int, message: str, causes: tuple[str, ...], annotations: dict[str, str], meant: str
) -> None:
    assert refusal(status, message, causes, annotations=annotations) == meant
