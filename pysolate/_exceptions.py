"""Exceptions of the ``pysolate`` package.

Raised in the Host, to the code that embeds Pysolate::

    PysolateError
    ├── RegistrationError (also TypeError)     a capability object or method is unusable:
    │                                          no capability methods, a non-plain default,
    │                                          a duplicate or invalid name, an unconfirmed
    │                                          MCP effect proposal
    ├── WorkspaceError                         freezing, reading or committing a workspace failed
    │   ├── CommitError                        the commit target is unusable
    │   ├── ApplyConflict                      ``apply``: paths changed since the freeze
    │   │                                      (``conflicts`` names each); nothing written
    │   └── WorkspaceChanged                   a lazy root's file changed since the freeze
    │                                          (a read fails: the program sees a ToolError)
    ├── SessionError                           a session cannot take this turn
    │   ├── SessionBusy                        (misuse) a turn while another one runs
    │   ├── SessionClosed                      (misuse) a turn outside ``async with``
    │   └── SessionBroken                      its Guest was stopped: a turn aborted after
    │       └── SessionExpired                 the Guest got its source, a crash; or the
    │                                          idle or session time limit passed
    ├── GuestStartError (also RuntimeError)    a Guest could not be started (its child died
    │                                          or never reported ready; a remote one never
    │                                          dialled back): raised by the run's call
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

Warned in the Host (``warnings.warn``), once per Host or per framework setup, when a setup
runs correctly but cannot gain anything from Pysolate; each message says how to fix it, and
``RunReport.setup_warnings`` repeats it on every run it applies to::

    PysolateWarning (UserWarning)
    ├── UnqualifiedToolsWarning                no tool may start early: every method is left
    │                                          at ``Effect.UNKNOWN``, or none of an agent's
    │                                          tools is qualified by ``effects=``
    └── NotStreamingWarning                    the framework hands over whole programs: the
                                               code is not streamed, so nothing starts while
                                               the model writes it

Silence one on purpose with ``warnings.filterwarnings("ignore", category=...)``.

Programmer misuse (``RegistrationError``, ``SessionBusy``, ``SessionClosed``) is kept apart from operational failures
(``WorkspaceError``, ``SessionBroken``). A program that raises, is rejected or hits a limit is *not* an
exception in the Host: it is a ``RunResult`` with that status. Cancellation is never
wrapped or swallowed.
"""

from __future__ import annotations

from ._guest_errors import ToolError as ToolError


class PysolateError(Exception):
    """Root of every error the ``pysolate`` package raises in the Host."""


class GuestStartError(PysolateError, RuntimeError):
    """A Guest could not be started (its child died or never reported ready; a remote
    Guest never dialled back). Also a ``RuntimeError``, as it was before it joined the tree."""


class RegistrationError(PysolateError, TypeError):
    """A capability object or method cannot be exposed to the Guest as declared."""


class WorkspaceError(PysolateError):
    """A workspace could not be frozen or committed."""


class CommitError(WorkspaceError):
    """The commit target is unusable (exists and is not empty, or is the source dir)."""


class ApplyConflict(WorkspaceError):
    """``branch.apply(path)`` refused: paths the branch changes no longer hold what the
    root held (or the index has them staged otherwise). Nothing was written.

    ``conflicts`` maps each such path to what was found there (``modified``, ``deleted``,
    ``created``, ``a directory now``...).
    """

    def __init__(self, conflicts: dict[str, str]) -> None:
        self.conflicts = dict(sorted(conflicts.items()))
        listed = "; ".join(f"{path}: {why}" for path, why in self.conflicts.items())
        super().__init__(
            f"not applied, {len(self.conflicts)} path(s) changed since the workspace was frozen: {listed}"
        )


class WorkspaceChanged(WorkspaceError):
    """A file of a lazily read root (``Workspace.frozen(path, lazy=True)``) changed since
    the freeze, so the content the root held can no longer be read. Raised by the read
    (the program sees a ``ToolError`` naming it, and its run ends ``error`` unless it
    catches it); ``path`` is the workspace path."""

    def __init__(self, path: str, why: str) -> None:
        self.path = path
        super().__init__(f"{path} changed since the workspace was frozen ({why}); nothing was read")


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


class PysolateWarning(UserWarning):
    """Root of the warnings the ``pysolate`` package issues: a setup that works but gains
    nothing from Pysolate. Each is issued once per Host or framework setup, not per run."""


class UnqualifiedToolsWarning(PysolateWarning):
    """No registered tool may start early, because the tools were left unqualified.

    Either every method on the Host is ``Effect.UNKNOWN`` (the default; none is ``PURE`` or
    ``IMMUTABLE_READ``), or an agent framework integration was given tools and ``effects``
    names none of them. Runs are correct and sequential; declaring the reads that may start
    early (``@capability(effect=Effect.PURE)``, ``effects={"search": Effect.PURE}``) fixes it.
    """


class NotStreamingWarning(PysolateWarning):
    """The framework setup hands Pysolate each program whole, never as a stream.

    A smolagents agent without streamed outputs, a Pydantic AI model that does not stream
    tool-call arguments, an OpenAI Agents SDK run that is not ``Runner.run_streamed``: the
    program runs when it is complete, so nothing starts while the model writes it (reads
    whose arguments are known still overlap one another). The message names the fix.
    """


class IsolationMismatch(IsolationUnavailable):
    """What the Host read of a Guest child in ``/proc`` (its seccomp mode, capabilities,
    uid maps, limits, mounts) is not what its level requires, whatever the child reported.

    The child is killed before any source reaches it. It means the child's code or the
    kernel did not do what was planned (a tampered library, a kernel that ignores a
    request): fail closed, like ``IsolationUnavailable``, of which it is a kind.
    """
