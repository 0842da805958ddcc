"""The table of Koordinator v1.8.0's migration controller test cases (`tests/koordinator_cases.py`) covers
every case the list holds, and every case it calls ported names a test that exists, with the case's name as
its id where the Go case has one."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from tests.koordinator_cases import DIFFERS, NOT_APPLICABLE, PORTED, VERDICTS, verdict

ROOT = Path(__file__).resolve().parents[2]
LISTED = [
    line
    for line in (ROOT / "tests/data/koordinator/test-cases.txt").read_text().splitlines()
    if line and not line.startswith("#")
]


def _source(path: str) -> str:
    # Joined where a long string is split over lines ("a " "b"), as a case's name may be.
    return re.sub(r'"\s*\n\s*"', "", (ROOT / path).read_text())


def test_every_listed_case_has_a_verdict_and_the_table_nothing_else() -> None:
    assert [entry for entry in LISTED if verdict(entry) is None] == []
    assert set(VERDICTS) - set(LISTED) == set()


def test_every_ported_case_names_a_test_that_exists() -> None:
    missing = []
    for entry in LISTED:
        kind, where = verdict(entry) or ("", "")
        if kind != PORTED:
            continue
        path, _, test = where.partition("::")
        function, _, case = test.partition("[")
        source = _source(path)
        if not re.search(rf"^(async )?def {function}\(", source, re.MULTILINE) or (
            case and not any(f'"{name}"' in source for name in _spellings(case.removesuffix("]")))
        ):
            missing.append(where)
    assert missing == []


def _spellings(case: str) -> set[str]:
    """A case's name as written, or as a template shared by the per-node and per-namespace cases."""
    return {case, case.replace("Namespace", "{per}"), case.replace("Node", "{per}")}


def test_a_case_that_is_not_ported_says_why() -> None:
    verdicts = [verdict(entry) for entry in LISTED]
    kinds = Counter(v[0] for v in verdicts if v is not None)
    assert set(kinds) <= {PORTED, DIFFERS, NOT_APPLICABLE}
    assert all(len(why) > 40 for kind, why in filter(None, verdicts) if kind != PORTED)
    assert kinds[PORTED] > kinds[DIFFERS] + kinds[NOT_APPLICABLE]
