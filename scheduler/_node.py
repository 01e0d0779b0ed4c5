"""A node of the event graph (one occurrence and its lifecycle) and the graph's statistics.

Kept apart from ``_graph`` so that the graph module holds the graph's behaviour only;
``EventGraph`` is the only writer of a node's fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from occurrences import CallKey, Effect, OccurrenceId, Site

from ._state import State


@dataclass(slots=True, eq=False)
class Node:
    """One occurrence in the graph (mutable identity; compare by ``id``)."""

    id: OccurrenceId
    effect: Effect
    pre_write: bool
    discardable: bool  # under a branch not (yet) known to be taken
    dead: bool  # under a branch known not to be taken
    order: int  # program order of discovery
    state: State = State.DISCOVERED
    args: tuple[object, ...] | None = None
    kwargs: dict[str, object] | None = None
    key: CallKey | None = None
    leader: OccurrenceId | None = None  # set while FOLLOWING (and after)
    followers: list[OccurrenceId] = field(default_factory=list)
    provisional: bool = False  # found in a statement still streaming (see the module docstring)
    # A later iteration of a loop whose body is still streaming: a ``break`` may still
    # follow in the body. Tentative like every provisional node (the rest of the statement
    # may change what encloses it) and run under the same policy (``LanePolicy.provisional``),
    # not as discardable: its own text and the loop's items are final.
    unsure: bool = False
    # Provisional, and ending after the model's text (closed by the repair): never run,
    # not even as a branch write (``scheduler._branches``), whose state says nothing.
    synthetic: bool = False

    @property
    def site(self) -> Site:
        return self.id.site

    @property
    def tentative(self) -> bool:
        """Early work for it may be wasted: under an undecided branch, or provisional."""
        return self.discardable or self.provisional


@dataclass(frozen=True, slots=True)
class GraphStatistics:
    """An immutable snapshot of the graph's size and lifecycle counts."""

    nodes: int
    edges: int
    states: Mapping[State, int]
    queued: int  # ready, not yet handed out
    handed_out: int
