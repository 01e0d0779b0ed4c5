"""Discovery of provisional statements, without changing what discovery knows.

A provisional statement (``_pending``) is an unfinished top-level statement made
parseable: its complete inner statements, its complete expression elements. Discovery
reads it exactly as it reads accepted code - same bindings, same evaluator, same rules -
but on a timeline of its own, so nothing it binds, mutates or writes leaks into the
accepted program's state: its names go to an overlay scope that is dropped, its writes
to a copy of the written set, its expansion work is given back afterwards.

Its occurrences are told apart from every real one by their path, which starts with
``(0, generation)`` (no call is on line 0): the same call found again when the statement
is complete is a different occurrence, so a provisional result never stands in for a
real one inside discovery. Across the two, only the call key connects them, in the
lane's claim table: exactly as the Guest's call is connected to early work.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import replace

from ._bindings import Scope
from ._discovery import Discovery
from ._model import OccurrenceId


def provisional_generation(occurrence_id: OccurrenceId) -> int | None:
    """The generation of a provisional occurrence, or None for a real one."""
    path = occurrence_id.path
    if path and isinstance(path[0], tuple) and path[0][0] == 0:
        return path[0][1]
    return None


class ProvisionalDiscovery(Discovery):
    """``Discovery`` that can also read provisional statements (``add_provisional``)."""

    def add_provisional(self, statements: Iterable[ast.stmt], generation: int) -> None:
        """Discover the occurrences of provisional ``statements`` (generation ``generation``,
        at least 1), leaving the accepted program's bindings, writes and budget untouched.

        Results of real occurrences still decide their branches and arguments; results of
        provisional ones (``result_known``) reach only provisional dependents.
        """
        top = self._top
        overlay = Scope(top.scope)
        ctx = replace(top, scope=overlay, globals=overlay, written=top.written.copy(), path=((0, generation),))
        expansions, seconds, global_names = self._expansions, self._expansion_seconds, set(self._global_names)
        try:
            for stmt in statements:
                try:
                    self._stmt(stmt, ctx)
                except RecursionError:
                    self._give_up(stmt, ctx)
        finally:
            self._expansions, self._expansion_seconds = expansions, seconds
            self._global_names = global_names
