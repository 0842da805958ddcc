"""The CLI's one expected failure type."""


class CliError(Exception):
    """An expected failure: printed as one line on stderr, exit code 1."""
