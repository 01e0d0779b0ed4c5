"""The CLI's own errors: a user mistake (one line, exit status 2) and a failed stream command."""

from __future__ import annotations


class CliError(Exception):
    """A user mistake the CLI reports in one line, exiting with status 2."""


class CommandFailed(Exception):
    """The command whose output was the stream exited with a non-zero status (the run is aborted)."""
