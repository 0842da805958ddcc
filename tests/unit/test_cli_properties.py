"""Every subcommand, driven with values that can never work (bad paths, ports, durations, names, numbers,
choices) in every option that checks its value: each ends before doing anything, exit 2, one line naming
the argument, never a traceback. The commands and options are read from the parser itself, so a new option
with a checked value is covered the day it is added."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from podherd import cli

# A valid value for each positional argument a command requires, so that the option under test is what fails.
POSITIONALS: dict[tuple[str, ...], list[str]] = {
    ("submit",): ["default/web-0"],
    ("drain",): ["node-1"],
    ("run",): ["tracker"],
}
BAD = st.one_of(
    st.text(max_size=12),
    st.integers(-(10**7), 10**7).map(str),
    st.sampled_from(
        [
            "/proc/podherd/x",
            "/nonexistent/dir/file",
            "",
            "-1",
            "65536",
            "5minutes",
            "Bad_Name",
            "a/b/c",
            "~0/x",
        ]
    ),
)


def commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subparsers:
        yield path, parser
        return
    for name, sub in subparsers[0].choices.items():
        yield from commands(sub, (*path, name))


def checked_options() -> list[tuple[tuple[str, ...], str, argparse.Action]]:
    found = []
    for path, parser in commands(cli.build_parser()):
        for action in parser._actions:
            if not action.option_strings or action.nargs == 0:
                continue
            if action.type is None and not action.choices:
                continue  # any text is a value for it
            found.append((path, action.option_strings[-1], action))
    return found


OPTIONS = checked_options()


def test_every_command_with_a_required_positional_has_a_valid_one_here() -> None:
    for path, parser in commands(cli.build_parser()):
        required = [a for a in parser._actions if not a.option_strings and a.required and a.nargs != "*"]
        required = [a for a in required if not isinstance(a, argparse._SubParsersAction)]
        assert not required or path in POSITIONALS, f"podherd {' '.join(path)}: give its positionals here"


def test_the_options_under_test_cover_ports_paths_and_durations() -> None:
    names = {option for _, option, _ in OPTIONS}
    assert {"--port", "--dir", "--picture", "--timeout", "--token-file", "--workdir"} <= names, names


@pytest.mark.parametrize(
    ("path", "option", "action"), OPTIONS, ids=[f"{' '.join(p)} {o}" for p, o, _ in OPTIONS]
)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=BAD)
def test_a_value_that_can_never_work_ends_at_once_in_one_line(
    path: tuple[str, ...],
    option: str,
    action: argparse.Action,
    value: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Parsed only (a value the parser takes would run the command): taken, or refused with exit 2 in one
    line; a check that fails any other way (an exception argparse does not expect) is a traceback."""
    argv = [*path, *POSITIONALS.get(tuple(path), []), option, value]
    try:
        cli.build_parser().parse_args(argv)
    except SystemExit as ended:
        assert ended.code == 2
        captured = capsys.readouterr()
        assert captured.out == ""
        (line,) = captured.err.splitlines()
        assert line.startswith(f"podherd {' '.join(path)}") and line.endswith("--help)"), line
    # else: taken (a value that can work): nothing to see
