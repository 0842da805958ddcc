import pytest

from shared.core.durations import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", 0.0),
        ("5m", 300.0),
        ("500ms", 0.5),
        ("1h30m", 5400.0),
        ("1.5s", 1.5),
        ("24h", 86400.0),
        ("2m0s", 120.0),
        ("-30s", -30.0),
        ("100us", 0.0001),
    ],
)
def test_parse(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "5", "5 minutes", "m", "1d", "abc", "5m30", "--5s"])
def test_parse_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(300, "5m0s"), (0.5, "500ms"), (5400, "1h30m0s"), (1.5, "1.5s"), (0, "0s"), (45, "45s")],
)
def test_format_matches_go(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
    assert parse_duration(text) == pytest.approx(seconds)
