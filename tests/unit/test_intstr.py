"""Koordinator v1.8.0's GetMaxUnavailable / GetMaxMigrating (migration/util/util.go): its own test cases
(TestGetMaxUnavailable), the defaults, percentages rounded down, a set value that comes to 0 taken as 1."""

import pytest

from shared.api.intstr import max_migrating, max_unavailable, scaled_value, validate_int_or_percent


# replicas -> expected limit with nothing configured (>10 -> 10%, 4..10 -> 2, else 1; rounded down)
@pytest.mark.parametrize(
    ("replicas", "expected"),
    [
        (0, 0),  # capped at the replica count
        (1, 1),
        (2, 1),
        (3, 1),
        (4, 2),
        (7, 2),
        (10, 2),
        (11, 1),
        (19, 1),
        (20, 2),
        (21, 2),
        (30, 3),
        (100, 10),
        (101, 10),
    ],
)
def test_default_limits(replicas: int, expected: int) -> None:
    assert max_unavailable(replicas, None) == expected
    assert max_migrating(replicas, None) == expected


@pytest.mark.parametrize(
    ("value", "replicas", "round_up", "expected"),
    [
        ("10%", 30, True, 3),  # exact: no float noise may round 3.0000000004 up to 4
        ("10%", 31, True, 4),
        ("10%", 31, False, 3),
        ("50%", 3, True, 2),
        ("50%", 3, False, 1),
        ("0%", 10, True, 0),
        ("100%", 7, True, 7),
        (5, 100, True, 5),
        ("25%", 0, True, 0),
    ],
)
def test_scaled_value(value: int | str, replicas: int, round_up: bool, expected: int) -> None:
    assert scaled_value(value, replicas, round_up) == expected


def test_configured_values_override_defaults() -> None:
    assert max_unavailable(3, 2) == 2
    assert max_unavailable(40, "25%") == 10
    assert max_migrating(7, "50%") == 3
    assert max_unavailable(10, "1%") == 1  # 0.1, down to 0: a set value that comes to 0 is 1
    assert max_unavailable(2, "60%") == 1  # Koordinator admits one of two, never refuses the workload


# Koordinator v1.8.0's TestGetMaxUnavailable (migration/util/util_test.go), case by case.
@pytest.mark.parametrize(
    ("replicas", "configured", "expected"),
    [
        pytest.param(6, "80%", 4, id="case1"),
        pytest.param(6, "150%", 6, id="case2"),
        pytest.param(6, 5, 5, id="case3"),
        pytest.param(6, 7, 6, id="case4"),
        pytest.param(6, None, 2, id="case5"),
        pytest.param(50, "0%", 1, id="case6"),
        pytest.param(6, 0, 1, id="case7"),  # an empty IntOrString: the int 0
    ],
)
def test_get_max_unavailable(replicas: int, configured: int | str | None, expected: int) -> None:
    assert max_unavailable(replicas, configured) == expected


@pytest.mark.parametrize(
    ("replicas", "configured", "expected"),
    [
        (50, "0%", 1),  # set, and comes to 0: 1 (Koordinator's GetMaxUnavailable), not the default
        (50, 0, 1),
        (6, "0%", 1),
        (50, "1%", 1),
        (0, 0, 0),  # capped at the replica count
        (6, "150%", 6),  # above the replica count: capped at it
        (6, 7, 6),
        (6, "100%", 6),
        (2, 5, 2),
    ],
)
def test_set_values_that_come_to_zero_are_one_and_all_are_capped(
    replicas: int, configured: int | str, expected: int
) -> None:
    assert max_unavailable(replicas, configured) == expected
    assert max_migrating(replicas, configured) == expected


@pytest.mark.parametrize("bad", [-1, "10", "ten%", "%", True, "-5%"])
def test_rejects_bad_values(bad: object) -> None:
    with pytest.raises(ValueError):
        validate_int_or_percent(bad)  # type: ignore[arg-type]
