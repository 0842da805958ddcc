"""kubesim's Reservation rules (Koordinator's): past `expires`, else past creation + `ttl` (24h when unset,
never when 0), an Available Reservation turns Failed with reason Expired, an ended one stays as it is; a pod
that matches several Reservations takes the one of lowest `reservation-order` first."""

from __future__ import annotations

from typing import Any

from kubesim.apiserver.records import parse_iso
from kubesim.controllers.reservation_rules import expired, preference

CREATED = "2026-11-24T10:00:00Z"
T0 = parse_iso(CREATED)


def reservation(phase: str = "Available", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "r", "creationTimestamp": CREATED}, "spec": spec, "status": {"phase": phase}}


def test_a_reservation_expires_at_its_deadline_and_not_before() -> None:
    cases = [
        (reservation(ttl="30s"), T0 + 30),
        (reservation(expires="2026-11-24T10:05:00Z", ttl="30s"), T0 + 300),  # expires wins over ttl
        (reservation(), T0 + 24 * 3600),  # Koordinator's default ttl
    ]
    for obj, deadline in cases:
        assert expired(obj, now=deadline - 1) is None
        for _ in range(2):  # asked again (each scheduler pass does): the same answer
            after = expired(obj, now=deadline)
            assert after is not None and after["status"]["phase"] == "Failed"
            assert after["status"]["conditions"][0]["reason"] == "Expired"
        assert obj["status"]["phase"] == "Available"  # the stored object is not touched


def test_ttl_zero_never_expires_and_an_ended_reservation_stays_as_it_is() -> None:
    assert expired(reservation(ttl="0s"), now=T0 + 10**9) is None
    assert expired(reservation("Succeeded", ttl="1s"), now=T0 + 10) is None
    assert expired(reservation("Failed", ttl="1s"), now=T0 + 10) is None


def test_a_pod_takes_the_lowest_reservation_order_first_and_unordered_ones_last() -> None:
    def room(name: str, order: str | None) -> dict[str, Any]:
        labels = {"scheduling.koordinator.sh/reservation-order": order} if order is not None else {}
        return {"metadata": {"name": name, "labels": labels}}

    rooms = [
        room("a", None),
        room("b", "300"),
        room("c", "0"),
        room("d", "100"),
        room("e", "x"),
        room("f", "200"),
    ]
    assert [r["metadata"]["name"] for r in sorted(rooms, key=preference)] == ["d", "f", "b", "a", "c", "e"]
