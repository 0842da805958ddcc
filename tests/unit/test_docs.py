"""The README is a front page and the documentation says what the code does: its configuration reference
is the one the config type generates, its annotation table names every key Podherd uses, and its links
resolve (the site's own links and anchors are checked by `make docs`, which builds it strictly)."""

from __future__ import annotations

import re
from pathlib import Path

from podherd import compatibility
from podherd.cli_reference import reference
from podherd.reference import config_reference
from shared.api import names

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def between(text: str, start: str, end: str) -> str:
    return text[text.index(start) + len(start) : text.index(end)].lstrip("\n")


def test_the_configuration_reference_is_the_generated_one() -> None:
    text = (DOCS / "reference" / "configuration.md").read_text()
    shown = between(text, "<!-- config-reference:start -->", "<!-- config-reference:end -->")
    assert shown == config_reference(), "paste `podherd config --reference` into the configuration page"


def test_the_cli_reference_is_the_generated_one() -> None:
    text = (DOCS / "reference" / "cli.md").read_text()
    shown = between(text, "<!-- cli-reference:start -->", "<!-- cli-reference:end -->")
    assert shown == reference(), "paste `python -m podherd.cli_reference` into the CLI page"
    for option in ("config --rbac", "--key", "--reason", "--wait-timeout", "--request-timeout", "--workdir"):
        assert option.split()[-1] in shown, option


def test_the_compatibility_page_is_the_generated_one_and_every_difference_says_why() -> None:
    text = (DOCS / "reference" / "koordinator-compatibility.md").read_text()
    shown = between(text, "<!-- compatibility:start -->", "<!-- compatibility:end -->")
    assert shown == compatibility.page(), "paste `podherd config --compatibility` into the compatibility page"
    rows = [
        row
        for section in compatibility.sections()
        if not section.get("podherd_only")
        for row in section["rows"]
    ]
    assert rows and all(row["why"] for row in rows if compatibility.differs(row)), [
        row["what"] for row in rows if compatibility.differs(row) and not row["why"]
    ]
    # Each key a row names is a migrationController key; the configuration reference says what its row says.
    lines = config_reference().splitlines()
    for row in rows:
        for key in row.get("keys", ()):
            verdict = "differs on purpose" if compatibility.differs(row) else "honoured"
            named = [line for line in lines if re.match(rf"\| `migrationController\.{key}[`.]", line)]
            assert named and all(verdict in line for line in named), (key, named)


def test_the_reference_covers_every_section_and_documented_default() -> None:
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


def test_the_readme_is_a_front_page_whose_links_resolve() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 200
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    assert links, "the README links into docs/"
    missing = [link for link in links if not (ROOT / link).is_file()]
    assert missing == []
    linked = {link for link in links if link.startswith("docs/")}
    pages = {str(p.relative_to(ROOT)) for p in DOCS.rglob("*.md")} - {"docs/index.md"}
    assert pages - linked == set(), "every page of the documentation is in the README's contents"


def test_sources_are_named_not_numbered() -> None:
    for page in [README, *DOCS.rglob("*.md")]:
        assert re.search(r"\bseeds? \d{3}\b", page.read_text()) is None, page


def test_every_podherd_label_and_annotation_is_documented() -> None:
    keys = {v for k, v in vars(names).items() if k.isupper() and isinstance(v, str)}
    api = (DOCS / "reference" / "api.md").read_text()
    assert {key for key in keys if f"`{key}`" not in api} == set()
