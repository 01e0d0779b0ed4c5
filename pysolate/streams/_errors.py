"""Exceptions of the stream side: why a model's stream gave no program to run.

::

    PysolateError
    └── StreamError                          the stream gave no complete program
        ├── StreamShapeError (also TypeError)  an event of no known SDK shape
        ├── StreamCut                          the SDK says the reply is incomplete
        │                                      (token limit, content filter, refusal, failure)
        │                                      or a code fence never closed       → aborted
        ├── StreamTimeout                      no event for ``idle_timeout`` seconds, or
        │                                      the code not complete by ``deadline`` → aborted
        ├── NoCodeBlock                        markdown without the Python block asked for,
        │                                      or no call of the code tool      → rejected
        └── ToolArgumentsError                 the code tool's arguments are not valid
                                               JSON, lack the argument, or it is not a
                                               string                           → rejected

``run_stream`` never raises these: it returns a ``RunResult`` whose status is the error's
``status`` and whose ``error.type`` is the class name, and in every case no program ran.
They are raised by the public helpers (``text_chunks``, ``tool_arguments``, ``record``) to
code that reads streams itself. Programmer misuse at the call (a ``str`` or an un-entered
stream manager passed as the stream, an unknown ``code=``) is a plain ``TypeError`` or
``ValueError`` instead, raised before anything starts.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from .._exceptions import PysolateError


class StreamError(PysolateError):
    """The stream ended without a complete program; ``status`` is the run's status."""

    status: ClassVar[Literal["rejected", "aborted"]] = "aborted"


class StreamCut(StreamError):
    """The reply is incomplete: the model stopped early (``reason`` says how).

    A program cut by a token limit may parse, and would then be a different program
    (a loop without its ``break``), so a cut stream is never run.
    """

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"the stream was cut, the reply is incomplete: {reason}; nothing was run")


class StreamTimeout(StreamError):
    """No event arrived for ``idle_timeout`` seconds, or the code was not complete by the
    ``deadline``."""


class NoCodeBlock(StreamError):
    """The stream holds no code in the format asked for (no ```python block, not the
    block asked for, or no call of the code tool)."""

    status: ClassVar[Literal["rejected", "aborted"]] = "rejected"


class ToolArgumentsError(StreamError):
    """The code tool's arguments are not valid JSON, lack the code argument, or give it a
    value that is not a string."""

    status: ClassVar[Literal["rejected", "aborted"]] = "rejected"
