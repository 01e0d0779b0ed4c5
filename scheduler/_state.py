"""The lifecycle of one occurrence in the event graph, and its single transition function.

::

    DISCOVERED ─┬─> BLOCKED ──┬─> READY ──> DISPATCHED ─┬─> COMPLETED ─┬─> CLAIMED
                │             │     │                   ├─> FAILED ────┼─> ORPHANED
                ├─────────────┘     └─> FOLLOWING ──────┤              └─> LATE
                ├─> INELIGIBLE                          └─> CANCELLED ──> LATE
                └─> DROPPED  (also from BLOCKED, READY, FOLLOWING)

- ``BLOCKED``: its arguments read results that have not arrived.
- ``READY``: arguments known, key computed, speculable and pre-write; handed out once.
- ``FOLLOWING``: ready, but an equal-key occurrence was handed out first; it completes or
  fails with that one (one physical observation, several logical occurrences).
- ``INELIGIBLE``: will never run early (effect not ``pure``/``immutable_read``, after a
  possible write, or its key could not be computed). It stays in the graph: it still
  orders views, and the Guest's formal call will run it.
- ``DROPPED``: never dispatched, and its branch turned out dead.
- ``CLAIMED``/``CANCELLED``/``LATE``/``ORPHANED``: the dispositions (docs/glossary.md);
  ``LATE`` also follows ``CANCELLED`` when the work completed after cancellation was asked,
  and ``FOLLOWING`` when the leader's work is ``LATE`` (a follower ends as its leader does).

Every lifecycle move goes through ``transition``; nothing assigns a state directly.
"""

from __future__ import annotations

import enum


class State(enum.StrEnum):
    """One occurrence's lifecycle (the diagram above); every move goes through ``transition``."""

    DISCOVERED = "discovered"
    BLOCKED = "blocked"
    READY = "ready"
    FOLLOWING = "following"
    INELIGIBLE = "ineligible"
    DROPPED = "dropped"
    DISPATCHED = "dispatched"
    COMPLETED = "completed"
    FAILED = "failed"
    CLAIMED = "claimed"
    CANCELLED = "cancelled"
    LATE = "late"
    ORPHANED = "orphaned"


DISPOSITIONS = frozenset({State.CLAIMED, State.CANCELLED, State.LATE, State.ORPHANED})
"""The states ``settle`` may move to."""

_S = State
_ALLOWED: dict[State, frozenset[State]] = {
    _S.DISCOVERED: frozenset({_S.BLOCKED, _S.READY, _S.INELIGIBLE, _S.DROPPED}),
    _S.BLOCKED: frozenset({_S.READY, _S.INELIGIBLE, _S.DROPPED}),
    _S.READY: frozenset({_S.DISPATCHED, _S.FOLLOWING, _S.DROPPED}),
    _S.FOLLOWING: frozenset({_S.READY, _S.COMPLETED, _S.FAILED, _S.DROPPED, _S.CANCELLED, _S.LATE}),
    _S.DISPATCHED: frozenset({_S.COMPLETED, _S.FAILED, _S.CANCELLED, _S.LATE}),
    _S.COMPLETED: frozenset({_S.CLAIMED, _S.ORPHANED, _S.LATE}),
    _S.FAILED: frozenset({_S.CLAIMED, _S.ORPHANED, _S.LATE}),
    _S.CANCELLED: frozenset({_S.LATE}),
    _S.INELIGIBLE: frozenset(),
    _S.DROPPED: frozenset(),
    _S.CLAIMED: frozenset(),
    _S.LATE: frozenset(),
    _S.ORPHANED: frozenset(),
}


class IllegalTransition(RuntimeError):
    """A lifecycle move the state machine does not allow (a programming error)."""

    def __init__(self, current: State, target: State) -> None:
        super().__init__(f"illegal transition {current.value} -> {target.value}")
        self.current = current
        self.target = target


def transition(current: State, target: State) -> State:
    """``target``, if an occurrence in ``current`` may move there.

    Raises:
        IllegalTransition: the move is not in the lifecycle above.
    """
    if target not in _ALLOWED[current]:
        raise IllegalTransition(current, target)
    return target
