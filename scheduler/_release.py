"""Dead early work: which dispatched occurrences can no longer be reached (issue 36).

The graph learns that an occurrence it dispatched is dead (its branch was decided not
taken, a ``break`` ends its loop sooner) or superseded (a newer parse of the statement
still streaming, or its acceptance, describes the program anew). Its early call must then
stop holding a lane slot at once - unless something newer still wants its result:

- a live follower (an equal-key occurrence of the newer description, ``FOLLOWING`` it);
- a live equal-key leader (a real occurrence leads where a provisional one led: the lane
  joins it to the same observation by key);
- for a superseded occurrence, a *twin* - the newer description's occurrence at the same
  call site (by position: it may be enclosed differently now) and the same path below the
  generation - whose arguments are not known yet (it waits for a result the lane is about
  to join, and may well make the same call), or a call site the newer description has not
  reached at all yet (a loop over a result, expanded when the result arrives).

What nobody wants is *withdrawn*: handed to the lane once (``take``), which cancels the
observation unless another occurrence it serves is live. ``review`` runs after every
graph update; it costs one pass over the suspects, which are dispatched work (bounded by
the lane's budget), never over the graph.
"""

from __future__ import annotations

from collections.abc import Mapping

from occurrences import CallKey, OccurrenceId, provisional_generation

from ._node import Node
from ._state import State

_Where = tuple[str, str, int, int, int, int]


class DeadWork:
    """Suspects, their reviews, and the withdrawn occurrences not taken yet.

    The graph's own tables, shared (never copied, and no reference to the graph itself,
    which owns this: that cycle would keep every run for the collector): ``nodes`` by id;
    ``leaders``, the first-ready node per key (a withdrawn leader leaves it, so an equal
    key found later leads anew); ``live``, the provisional generations not superseded.
    """

    __slots__ = (
        "_at_place",
        "_at_site",
        "_gone",
        "_leaders",
        "_live",
        "_nodes",
        "_suspects",
        "_withdrawn",
    )

    def __init__(
        self,
        nodes: Mapping[OccurrenceId, Node],
        leaders: dict[CallKey, Node],
        live: Mapping[int, object],
    ) -> None:
        self._nodes = nodes
        self._leaders = leaders
        self._live = live
        # Dispatched nodes that are dead or superseded, reviewed until they end or go.
        self._suspects: dict[OccurrenceId, Node] = {}
        self._withdrawn: list[OccurrenceId] = []  # since the last ``take``
        self._gone: set[OccurrenceId] = set()  # every one withdrawn (each is withdrawn once)
        # The newest current node per call site, and per (call site, path below the generation).
        self._at_site: dict[_Where, Node] = {}
        self._at_place: dict[tuple[_Where, tuple[object, ...]], Node] = {}

    def place(self, node: Node) -> None:
        """``node`` (current) was just discovered: the newest at its site and place."""
        where = _where(node)
        self._at_site[where] = node
        self._at_place[where, _below(node)] = node

    def suspect(self, node: Node) -> None:
        """``node`` is dispatched and became dead or superseded."""
        if node.id not in self._gone:
            self._suspects[node.id] = node

    def take(self) -> list[OccurrenceId]:
        withdrawn, self._withdrawn = self._withdrawn, []
        return withdrawn

    def review(self) -> None:
        """Withdraw every suspect still running that nothing wants any more."""
        if not self._suspects:
            return
        for node in list(self._suspects.values()):
            if node.state is State.DISPATCHED and self._wanted(node):
                continue
            del self._suspects[node.id]
            if node.state is not State.DISPATCHED:
                continue  # it ended (its result is in): nothing left to release
            if node.key is not None and self._leaders.get(node.key) is node:
                del self._leaders[node.key]
            self._withdrawn.append(node.id)
            self._gone.add(node.id)

    def _current(self, node: Node) -> bool:
        """Not superseded: accepted, or of a live provisional parse."""
        return not node.provisional or provisional_generation(node.id) in self._live

    def _wanted(self, node: Node) -> bool:
        if any(self._nodes[f].state is State.FOLLOWING for f in node.followers):
            return True
        if node.key is not None:
            leader = self._leaders.get(node.key)
            if (
                leader is not None
                and leader is not node
                and not leader.dead
                and self._current(leader)
            ):
                return True
        if node.dead:
            return False
        where = _where(node)
        newest = self._at_site.get(where)
        if newest is None or not self._current(newest):
            return True  # nothing newer has reached its call site yet
        twin = self._at_place.get((where, _below(node)))
        return (
            twin is not None
            and twin is not node
            and not twin.dead
            and self._current(twin)
            and twin.state in (State.DISCOVERED, State.BLOCKED)
        )


def _where(node: Node) -> _Where:
    """A call site as text: capability, method and position, whatever encloses it."""
    site = node.site
    return (
        site.capability,
        site.method,
        site.lineno,
        site.col_offset,
        site.end_lineno,
        site.end_col_offset,
    )


def _below(node: Node) -> tuple[object, ...]:
    """An occurrence's path, without a provisional one's generation: the same arrival at
    the same site has the same one in every parse."""
    path = node.id.path
    return path[1:] if node.provisional else path
