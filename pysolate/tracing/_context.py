"""What the caller knows about a run that Pysolate cannot: the code action it executes.

A framework that gives a model a ``run_code`` tool already has an ``execute_tool run_code``
span with the model's tool-call id, and often a conversation id. A ``ContextVar`` carries
both into the run, so every entry point (``run_stream``, ``run_source``, sessions, the
integrations) picks them up without one more parameter each, and concurrent runs in other
tasks never see each other's.

A session sets one more thing the same way, for the runs of its turns: which session and
which turn they are (``session_turn``), so a trace backend can put a session's runs in order.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CodeAction:
    """The enclosing code action of the runs started in this context."""

    tool_call_id: str | None = None
    """The model's id for the tool call whose argument is the program (``call_abc123``)."""
    conversation_id: str | None = None
    """``gen_ai.conversation.id``: the session or thread the run belongs to."""


_OUTSIDE = CodeAction()
"""Outside any ``code_action`` block (frozen, so one shared default is safe)."""

_CURRENT: ContextVar[CodeAction] = ContextVar("pysolate_code_action", default=_OUTSIDE)


@contextmanager
def code_action(
    *, tool_call_id: str | None = None, conversation_id: str | None = None
) -> Iterator[CodeAction]:
    """Runs started inside this block record the enclosing tool call and conversation.

    ``None`` keeps what an outer block set, so a conversation id set once per session and a
    tool-call id set per call combine.
    """
    outer = _CURRENT.get()
    action = CodeAction(
        tool_call_id if tool_call_id is not None else outer.tool_call_id,
        conversation_id if conversation_id is not None else outer.conversation_id,
    )
    token = _CURRENT.set(action)
    try:
        yield action
    finally:
        _CURRENT.reset(token)


def current_code_action() -> CodeAction:
    """The code action of the current context (all ``None`` outside ``code_action``)."""
    return _CURRENT.get()


@dataclass(frozen=True, slots=True)
class SessionTurn:
    """The session turn that the runs started in this context belong to."""

    session_id: str
    turn: int
    """1 for the session's first turn (rejected turns count: they are turns the model sent)."""


_TURN: ContextVar[SessionTurn | None] = ContextVar("pysolate_session_turn", default=None)


@contextmanager
def session_turn(session_id: str, turn: int) -> Iterator[SessionTurn]:
    """Runs started inside this block are turn ``turn`` of session ``session_id``."""
    current = SessionTurn(session_id, turn)
    token = _TURN.set(current)
    try:
        yield current
    finally:
        _TURN.reset(token)


def current_session_turn() -> SessionTurn | None:
    """The session turn of the current context (None outside a session's turn)."""
    return _TURN.get()
