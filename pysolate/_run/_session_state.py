"""A session's limits, states and statistics (``pysolate._run._session`` runs the turns).

The states move NEW → IDLE ⇄ RUNNING; IDLE/RUNNING → BROKEN; any → CLOSED, and no other
way: ``advance`` raises ``SessionError`` for any other move, so a bug in the session's
bookkeeping surfaces where it happens instead of as a turn run in the wrong state.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from .._exceptions import SessionError


@dataclass(frozen=True, slots=True)
class SessionLimits:
    """Limits of a session as a whole (each turn also has the Host's ``GuestLimits``)."""

    wall_time: float = 3600.0
    """Seconds from opening the session until its Guest is stopped (a turn running then is
    aborted and breaks the session; a later one raises ``SessionExpired``)."""
    idle_time: float = 300.0
    """Seconds the Guest may wait between turns before it is stopped (``SessionExpired``)."""


class SessionState(enum.Enum):
    """NEW → IDLE ⇄ RUNNING; IDLE/RUNNING → BROKEN; any → CLOSED."""

    NEW = "new"
    IDLE = "idle"
    RUNNING = "running"
    BROKEN = "broken"
    CLOSED = "closed"


_MOVES = {
    SessionState.NEW: {SessionState.IDLE, SessionState.CLOSED},
    SessionState.IDLE: {SessionState.RUNNING, SessionState.BROKEN, SessionState.CLOSED},
    SessionState.RUNNING: {SessionState.IDLE, SessionState.BROKEN, SessionState.CLOSED},
    SessionState.BROKEN: {SessionState.CLOSED},
    SessionState.CLOSED: set(),
}


def advance(state: SessionState, to: SessionState) -> SessionState:
    if to not in _MOVES[state]:
        raise SessionError(f"a session cannot go from {state.value} to {to.value}")
    return to


@dataclass(frozen=True, slots=True)
class SessionStatistics:
    """What a session has done so far (a snapshot)."""

    turns: int
    """Turns started (every status)."""
    executed: int
    """Turns whose program reached the Guest."""
    rejected: int
    reused: int
    """Early calls served by a rejected turn's result instead of a new physical call."""
    state: SessionState
