"""Generated sessions: multi-turn programs whose later turns use what earlier turns left.

One ``_Writer`` and one name scope run through all the turns, so turn N reads lists,
strings and numbers (and calls functions) that turns before it bound: the shape where
speculation starts from the globals the Guest reported. Each turn is one of

- ``ok``: a program as ``programs`` draws them (it may still raise, at a failing read);
- ``raises``: statements, then an exception at top level (what ran before it is kept);
- ``rejected``: statements then a syntax error; nothing it binds exists afterwards, and
  half the time the next turn is its retry (the same statements, corrected), the shape
  where the rejected turn's early reads are claimed;
- ``cut``: statements whose stream fails before it ends (aborted, changes nothing).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from hypothesis import strategies as st

from .programs import _Scope, _Writer

TurnKind = Literal["ok", "raises", "rejected", "cut"]

SYNTAX_ERRORS = ("x = (\n", "def broken(:\n    pass\n", "print('unclosed)\n")
"""Endings that make a turn's source fail to compile (the model's typo)."""


@dataclass(frozen=True, slots=True)
class Turn:
    kind: TurnKind
    source: str


def _final(draw: st.DrawFn, scope: _Scope) -> list[str]:
    names = scope.strs + scope.lists + scope.ints
    if not names:
        return []
    return [draw(st.sampled_from(names))]


@dataclass(slots=True)
class _Pending:
    """A rejected turn's statements and what they would bind, for its retry."""

    lines: list[str]
    scope: _Scope
    functions: list[str]


@st.composite
def sessions(draw: st.DrawFn, max_turns: int = 4, max_statements: int = 4) -> tuple[Turn, ...]:
    """A session's turns, in order (see the module docstring)."""
    writer = _Writer(draw)
    scope = _Scope()
    turns: list[Turn] = []
    pending: _Pending | None = None
    for _ in range(draw(st.integers(1, max_turns))):
        if pending is not None and draw(st.booleans()):
            # The retry: the rejected statements, corrected; they bind what they would have.
            scope, writer.functions = pending.scope, pending.functions
            turns.append(Turn("ok", "\n".join([*pending.lines, *_final(draw, scope)]) + "\n"))
            pending = None
            continue
        pending = None
        kind: TurnKind = draw(st.sampled_from(("ok", "ok", "ok", "raises", "rejected", "cut")))
        kept = kind in ("ok", "raises")
        work = scope if kept else scope.child()
        functions = list(writer.functions)
        lines: list[str] = []
        for _ in range(draw(st.integers(1, max_statements))):
            lines += writer.statement(work, 0)
        if kind == "ok":
            source = "\n".join([*lines, *_final(draw, scope)]) + "\n"
        elif kind == "raises":
            source = "\n".join([*lines, "raise ValueError('turn failed')"]) + "\n"
        elif kind == "rejected":
            source = "\n".join(lines) + "\n" + draw(st.sampled_from(SYNTAX_ERRORS))
            pending = _Pending(lines, work, list(writer.functions))
        else:
            source = "\n".join(lines) + "\n"
        if not kept:
            writer.functions = functions  # what the turn defined does not exist
        turns.append(Turn(kind, source))
    return tuple(turns)
