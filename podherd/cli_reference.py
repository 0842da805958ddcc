"""The CLI reference, generated from the parser itself (`python -m podherd.cli_reference`), so that the
documentation's tables (docs/reference/cli.md) name every command and option the code takes, with its
default, and none it does not."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from podherd.cli import build_parser

HIDDEN = frozenset({"-h", "--help"})


def commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser, str]]:
    """Each runnable command: its words, its parser, and the help its parent gives it."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                nested = [a for a in sub._actions if isinstance(a, argparse._SubParsersAction)]
                if nested:
                    yield from commands(sub, (*path, name))
                else:
                    yield (*path, name), sub, helps.get(name, "")


def _argument(action: argparse.Action) -> str:
    if action.option_strings:
        names = ", ".join(f"`{o}`" for o in action.option_strings)
        if action.nargs == 0:
            return names
        shown = action.metavar or (
            "|".join(str(c) for c in action.choices) if action.choices else action.dest.upper()
        )
        return f"{names} {_escaped(str(shown))}"
    shown = action.metavar or (
        "|".join(str(c) for c in action.choices) if action.choices else action.dest.upper()
    )
    optional = action.nargs in ("?", "*")
    return f"`{_escaped(str(shown))}`" + (" (optional)" if optional else "")


def _default(action: argparse.Action) -> str:
    if action.nargs == 0 or action.default in (None, [], argparse.SUPPRESS):
        return ""
    return f"`{action.default}`"


def _escaped(text: str) -> str:
    return text.replace("|", "\\|")


def _help(action: argparse.Action) -> str:
    return _escaped(" ".join((action.help or "").split()))


def reference() -> str:
    parser = build_parser()
    lines: list[str] = []
    for path, sub, summary in commands(parser):
        lines += [f"### `podherd {' '.join(path)}`", "", _escaped(" ".join(summary.split())) or "", ""]
        rows = [a for a in sub._actions if not set(a.option_strings) & HIDDEN]
        if rows:
            lines += ["| argument | default | what |", "|---|---|---|"]
            lines += [f"| {_argument(a)} | {_default(a)} | {_help(a)} |" for a in rows]
            lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


if __name__ == "__main__":
    print(reference(), end="")
