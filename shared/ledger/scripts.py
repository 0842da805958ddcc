"""Podherd's Redis scripts, as loaded: a script's file after the shared functions it uses, the ledger's
after the table of its key names."""

from __future__ import annotations

from importlib import resources

from shared.ledger.keys import lua_prelude


def as_text(value: bytes | str) -> str:
    """A Redis reply as text (clients may be set to return bytes or str)."""
    return value.decode() if isinstance(value, bytes) else value


LEDGER = "shared.ledger"


def lua_script(name: str, *prelude: str, home: str = LEDGER) -> str:
    """One of Podherd's Redis scripts (`<home>/lua/<name>`: a service keeps its own beside it), after the
    shared functions it uses (`shared/ledger/lua/`). The ledger's own scripts start with the table `K` of
    the ledger's key families."""
    shared = resources.files(LEDGER).joinpath("lua")
    own = resources.files(home).joinpath("lua").joinpath(name).read_text()
    keys = [lua_prelude()] if home == LEDGER else []
    return "\n".join([*keys, *(shared.joinpath(p).read_text() for p in prelude), own])
