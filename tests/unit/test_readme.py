"""The README's generated parts stay generated: its configuration reference is what the config type says."""

from __future__ import annotations

from pathlib import Path

from podherd.reference import config_reference

README = Path(__file__).resolve().parents[2] / "README.md"


def between(text: str, start: str, end: str) -> str:
    return text[text.index(start) + len(start) : text.index(end)].lstrip("\n")


def test_the_configuration_reference_is_the_generated_one() -> None:
    text = README.read_text()
    shown = between(text, "<!-- config-reference:start -->", "<!-- config-reference:end -->")
    assert shown == config_reference(), "run `podherd config --reference` and paste it into the README"


def test_the_reference_covers_every_section_and_seed_default() -> None:
    reference = config_reference()
    for line in (
        "| `migrationController.maxMigratingPerNode` | int | `2` |",
        "| `migrationController.evictQPS` | float \\| str | `10.0` |",
        '| `migrationController.defaultJobTTL` | str | `"5m"` |',
        '| `nats.subjectPrefix` | str | `"podherd"` |',
    ):
        assert line in reference
    for section in ("nats.", "redis.", "kubernetes.", "watcher.", "arbitrator.", "http.", "logging."):
        assert f"`{section}" in reference
