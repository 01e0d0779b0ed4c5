"""Exceptions of the ``pysolate`` package.

Raised in the Host, to the code that embeds Pysolate::

    PysolateError
    ├── RegistrationError (also TypeError)     a capability object or method is unusable:
    │                                          no capability methods, a non-plain default,
    │                                          a duplicate or invalid name, an unconfirmed
    │                                          MCP effect proposal
    ├── WorkspaceError                         freezing or committing a workspace failed
    │   └── CommitError                        the commit target is unusable
    └── IsolationUnavailable                   this machine cannot isolate a Guest at the
                                               level the Host asked for (nothing ran)

Raised inside the program (the Guest), never in the Host::

    ToolError                                  a tool failed with a non-builtin exception
                                               (``type_name`` says which); builtin ones
                                               (``FileNotFoundError``...) are re-raised as
                                               themselves

Programmer misuse (``RegistrationError``) is kept apart from operational failures
(``WorkspaceError``). A program that raises, is rejected or hits a limit is *not* an
exception in the Host: it is a ``RunResult`` with that status. Cancellation is never
wrapped or swallowed.
"""

from __future__ import annotations

from ._guest_errors import ToolError as ToolError


class PysolateError(Exception):
    """Root of every error the ``pysolate`` package raises in the Host."""


class RegistrationError(PysolateError, TypeError):
    """A capability object or method cannot be exposed to the Guest as declared."""


class WorkspaceError(PysolateError):
    """A workspace could not be frozen or committed."""


class CommitError(WorkspaceError):
    """The commit target is unusable (exists and is not empty, or is the source dir)."""


class IsolationUnavailable(PysolateError):
    """The machine cannot give a Guest the isolation level the Host requires.

    Raised before any source reaches a Guest; the message says what is missing and how to
    get it. A Host never falls back to a weaker level on its own.
    """
