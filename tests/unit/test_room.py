"""Before each eviction of a ReservationFirst job: does the job's Reservation still hold room for it?"""

from __future__ import annotations

from typing import Any

import pytest

from services.executor.room import no_room


def reservation(phase: str, node: str | None = "node-2", owners: list[dict[str, str]] | None = None) -> Any:
    status: dict[str, Any] = {"phase": phase, **({"nodeName": node} if node else {})}
    if owners:
        status["currentOwners"] = owners
    return {"metadata": {"name": "j", "resourceVersion": "7"}, "status": status}


@pytest.mark.parametrize(
    ("obj", "why", "later"),
    [
        (reservation("Available"), None, None),
        (None, "the job has no Reservation", False),
        (reservation("Pending", None), "Reservation j is not scheduled yet", True),
        (reservation("Available", "node-1"), "Reservation j is on the pod's own node node-1", False),
        (
            reservation("Available", owners=[{"namespace": "default", "name": "web-9"}]),
            "Reservation j was taken by default/web-9",
            False,
        ),
        (reservation("Succeeded"), "Reservation j was taken by another pod", False),
        (reservation("Failed"), "Reservation j has failed", False),
    ],
)
def test_no_room(obj: Any, why: str | None, later: bool | None) -> None:
    found = no_room(obj, "node-1")
    assert (found.why if found else None, found.later if found else None) == (why, later)
