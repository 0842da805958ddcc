"""The soft-eviction annotation as Koordinator's SoftEvictionSpec reads it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import msgspec
import pytest

from shared.api.soft_eviction import SoftEvictionSpec, metav1_time, soft_eviction


def test_the_value_has_koordinators_fields_and_nothing_else() -> None:
    moment = datetime(2026, 11, 23, 10, 46, 1, 987654, tzinfo=UTC)
    value = json.loads(soft_eviction(moment, "migration job j", {"gracePeriodSeconds": 30}))
    assert value == {
        "timestamp": "2026-11-23T10:46:01Z",
        "deleteOptions": {"gracePeriodSeconds": 30},
        "initiator": "podherd",
        "reason": "migration job j",
    }


def test_empty_fields_are_left_out_as_omitempty_does() -> None:
    value = json.loads(soft_eviction(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), "r", None))
    assert set(value) == {"timestamp", "initiator", "reason"}
    assert "trigger" not in value


@pytest.mark.parametrize(
    ("moment", "written"),
    [
        (datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC), "2026-03-04T05:06:07Z"),
        (datetime(2026, 3, 4, 7, 6, 7, 500000, tzinfo=timezone(timedelta(hours=2))), "2026-03-04T05:06:07Z"),
    ],
)
def test_timestamp_as_metav1_time_marshals_it(moment: datetime, written: str) -> None:
    assert metav1_time(moment) == written


def test_a_value_with_an_unknown_field_is_not_a_soft_eviction_spec() -> None:
    with pytest.raises(msgspec.ValidationError, match="trigger"):
        msgspec.json.decode(b'{"trigger": "podherd"}', type=SoftEvictionSpec)
