"""The CLI's one expected failure type, and its exit code."""

EXIT_FAILED = 1


class CliError(Exception):
    """An expected failure: printed as one line on stderr, exit code 1."""
