"""The Koordinator compatibility table (`podherd/data/koordinator_compatibility.yaml`): for everything Podherd
accepts from Koordinator v1.8.0, what Koordinator does, what Podherd does and, where they differ, why. One
table makes the compatibility page (`podherd config --compatibility`) and the configuration reference's
Koordinator column, so the two cannot say different things."""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

import yaml

SAME = "the same"


@functools.cache
def sections() -> tuple[dict[str, Any], ...]:
    text = resources.files("podherd").joinpath("data/koordinator_compatibility.yaml").read_text()
    return tuple(yaml.safe_load(text))


@functools.cache
def config_keys() -> frozenset[str]:
    """The migrationController keys the table's rows name."""
    return frozenset(k for section in sections() for row in section["rows"] for k in row.get("keys", ()))


def differs(row: dict[str, Any]) -> bool:
    return not str(row.get("podherd", "")).startswith(SAME)


def config_note(field: str) -> str | None:
    """What the table says of a `migrationController` key, or None where no row names it."""
    for section in sections():
        for row in section["rows"]:
            if field in row.get("keys", ()):
                return "differs on purpose (compatibility page)" if differs(row) else "honoured"
    return None


def page() -> str:
    """The compatibility page's tables, in Markdown."""
    out: list[str] = []
    for section in sections():
        out += [f"## {section['title']}", ""]
        if section.get("text"):
            out += [section["text"], ""]
        if section.get("podherd_only"):
            out += [f"| {section['first']} | Podherd |", "|---|---|"]
            out += [f"| {row['what']} | {row['podherd']} |" for row in section["rows"]]
        else:
            out += [
                f"| {section['first']} | Koordinator v1.8.0 | Podherd | why they differ |",
                "|---|---|---|---|",
            ]
            out += [
                f"| {row['what']} | {row['koordinator']} | {row['podherd']} | {row.get('why', '')} |".replace(
                    " |  |", " | |"
                )
                for row in section["rows"]
            ]
        out.append("")
    return "\n".join(out)
