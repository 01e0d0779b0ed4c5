"""What earlier turns of a session left: the starting point of discovery in the next turn.

A session's Guest keeps its globals from turn to turn, so turn N's program may read a name
that turn N-1 bound. Discovery starts from what the Guest reported after the last turn
(``pysolate._guest.child._turn_report``): ``known`` plain values, which the evaluator uses like any
value computed in the program (a ``paths`` list lets ``for p in paths: docs.read(p)``
start its reads early), and ``opaque`` names of other values (functions, modules,
objects), any use of which is unknown code, never a builtin of the same name.

The report is the Guest's word and needs no trust: discovery only decides what may start
early (``pure`` and ``immutable_read`` calls), and a claim is still exact by key.

Mutable known values (lists, dicts) may share structure with one another, exactly as the
earlier turns left them (``b = a``), so they share one origin: mutating one forgets all of
them, never fewer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

PRIOR_ORIGIN = ("prior-turns",)
"""The one origin tag of every mutable value earlier turns left (see ``Origins``)."""


@dataclass(frozen=True, slots=True)
class PriorGlobals:
    """The globals earlier turns left: plain values by name, and names of other values."""

    known: Mapping[str, object] = field(default_factory=dict)
    opaque: frozenset[str] = frozenset()
