"""Exceptions of the ``pysolate`` package.

Raised in the Host, to the code that embeds Pysolate::

    PysolateError
    ├── RegistrationError (also TypeError)     a capability object or method is unusable:
    │                                          no capability methods, a non-plain default,
    │                                          a duplicate or invalid name, an unconfirmed
    │                                          MCP effect proposal
    ├── WorkspaceError                         freezing or committing a workspace failed
    │   └── CommitError                        the commit target is unusable
    ├── SessionError                           a session cannot take this turn
    │   ├── SessionBusy                        (misuse) a turn while another one runs
    │   ├── SessionClosed                      (misuse) a turn outside ``async with``
    │   └── SessionBroken                      its Guest was stopped: a turn aborted after
    │       └── SessionExpired                 the Guest got its source, a crash; or the
    │                                          idle or session time limit passed
    └── IsolationUnavailable                   this machine cannot isolate a Guest at the
        │                                      level the Host asked for (nothing ran)
        └── IsolationMismatch                  a Guest child's confinement, read by the
                                               Host from /proc, is not what its level
                                               requires (it was killed; nothing ran)

Raised inside the program (the Guest), never in the Host::

    ToolError                                  a tool failed with a non-builtin exception
                                               (``type_name`` says which); builtin ones
                                               (``FileNotFoundError``...) are re-raised as
                                               themselves

Programmer misuse (``RegistrationError``, ``SessionBusy``, ``SessionClosed``) is kept apart from operational failures
(``WorkspaceError``, ``SessionBroken``). A program that raises, is rejected or hits a limit is *not* an
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


class SessionError(PysolateError):
    """A session cannot take this turn (see the subclasses)."""


class SessionBusy(SessionError):
    """A turn was started while another turn of the same session runs (turns are sequential)."""


class SessionClosed(SessionError):
    """A turn was started on a session that is not open (before or after ``async with``)."""


class SessionBroken(SessionError):
    """The session's Guest was stopped, so its globals are gone and no turn can run.

    ``reason`` says what stopped it: the error of the turn that was aborted after its Guest
    received the source (a limit, a crash, a protocol error), or the time limit passed.
    """

    def __init__(self, message: str, reason: object = None) -> None:
        super().__init__(message)
        self.reason = reason


class SessionExpired(SessionBroken):
    """The session's idle or total time limit passed; its Guest was stopped."""


class IsolationUnavailable(PysolateError):
    """The machine cannot give a Guest the isolation level the Host requires.

    Raised before any source reaches a Guest; the message says what is missing and how to
    get it. A Host never falls back to a weaker level on its own.
    """


class IsolationMismatch(IsolationUnavailable):
    """What the Host read of a Guest child in ``/proc`` (its seccomp mode, capabilities,
    uid maps, limits, mounts) is not what its level requires, whatever the child reported.

    The child is killed before any source reaches it. It means the child's code or the
    kernel did not do what was planned (a tampered library, a kernel that ignores a
    request): fail closed, like ``IsolationUnavailable``, of which it is a kind.
    """
