"""The ledger's key families have one owner (shared/ledger/keys.py): the scripts spell them through its
table `K`, the Python through `LedgerKeys`, and every family named there is one the ledger uses."""

from __future__ import annotations

import re
from pathlib import Path

from shared.ledger.keys import FAMILIES, MEMBER_FAMILIES, LedgerKeys, lua_prelude
from shared.ledger.scripts import lua_script

ROOT = Path(__file__).resolve().parents[2]
LEDGER_SCRIPTS = sorted((ROOT / "shared" / "ledger" / "lua").glob("*.lua"))
assert LEDGER_SCRIPTS, "the ledger's scripts are where this test reads them"
LEDGER_PYTHON = [ROOT / "shared" / "ledger" / f for f in ("store.py", "queue.py", "rebuild.py")]


def test_keys_are_under_one_hash_tag() -> None:
    keys = LedgerKeys.of("podherd")
    assert keys.key("claims") == "{podherd}:ledger:claims"
    assert keys.member("slots", "node:n1") == "{podherd}:ledger:slots:node:n1"


def test_the_lua_table_spells_what_the_python_does() -> None:
    table = dict(re.findall(r"(\w+) = '([^']*)'", lua_prelude()))
    keys = LedgerKeys("p")
    assert {f: "p" + s for f, s in table.items() if f in FAMILIES} == {f: keys.key(f) for f in FAMILIES}  # type: ignore[arg-type]
    assert {f: "p" + s + "x" for f, s in table.items() if f in MEMBER_FAMILIES} == {
        f: keys.member(f, "x")  # type: ignore[arg-type]
        for f in MEMBER_FAMILIES
    }


def test_no_script_or_module_of_the_ledger_spells_a_key_itself() -> None:
    for script in LEDGER_SCRIPTS:
        code = "\n".join(
            line for line in script.read_text().splitlines() if not line.lstrip().startswith("--")
        )
        assert re.search(r"\.\. ':", code) is None, script.name
    for module in LEDGER_PYTHON:
        assert re.search(r"prefix\}:", module.read_text()) is None, module.name


def test_every_family_is_used() -> None:
    python = [*(ROOT / "shared").rglob("*.py"), *(ROOT / "services").rglob("*.py")]
    code = " ".join(s.read_text() for s in [*LEDGER_SCRIPTS, *python])
    unused = [
        f
        for f in (*FAMILIES, *MEMBER_FAMILIES)
        if f"K.{f}" not in code and f'key("{f}")' not in code and f'member("{f}"' not in code
    ]
    assert unused == []


def test_every_ledger_script_starts_with_the_table() -> None:
    assert lua_script("release.lua", "parking.lua").startswith(lua_prelude())
    assert not lua_script("room.lua", home="services.tracker.jobs").startswith(lua_prelude())
