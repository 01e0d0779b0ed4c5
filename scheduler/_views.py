"""Re-speculation after writes: reads that follow a write start when the write returns.

Discovery marks a read that follows a possible write of its capability as not pre-write:
it must see the write, so it can never run against the frozen root. Before this module
such reads always waited for the Guest to reach them, one after the other. But once the
Guest's write has *returned*, the state those reads will see exists: the run's own object
at the capability's current view. A read whose arguments are known can start right then,
keyed on that view; the Guest's call claims it only if its own key - computed when it
makes the call - is identical (docs/contract.md, rule 3). If another write intervenes, the
view moves on and the early read is never claimed: a wasted read, accounted ``orphaned``
or ``cancelled``, never a different result.

Which reads to start is a guess about the Guest's progress, and only a guess: the Guest's
``k``-th call that may write capability ``C`` is taken to be the ``k``-th such occurrence
of ``C`` in program order (dead ones skipped). The reads started are those of ``C``
between that occurrence and the next one. The guess is abandoned for ``C`` - nothing more
is re-speculated on it - as soon as it cannot be made with confidence: the next write is
under an undecided branch, or its known arguments differ from the Guest's call.

A declared scope keeps working as before: a read whose scope cannot overlap the write's
is pre-write and runs against the root without waiting for anything.

Prior art: none of the peers does this. Pydantic AI code mode stops scanning for
speculation at the first call of a tool not declared read-only.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from occurrences import CallKey

from ._observation import Observation
from ._state import State

if TYPE_CHECKING:
    from ._graph import EventGraph, KeyFn, Node
    from ._lane import SpeculativeLane

RunOnView = Callable[["Node", Observation], Awaitable[object]]
"""Executes one early read against the run's own object (the view the Guest sees now)."""


class Respeculation:
    """Follows the Guest's writes and starts the reads that come after each one.

    Synchronous and not thread-safe: ``written`` is called from the run's broker, in the
    task that served the Guest's write, before the Guest continues.
    """

    def __init__(
        self,
        graph: EventGraph,
        lane: SpeculativeLane,
        key_for: KeyFn,
        run: RunOnView,
        *,
        allow_discardable: bool = False,
        may_dispatch: Callable[[Node], bool] | None = None,
    ) -> None:
        self._graph = graph
        self._lane = lane
        self._key_for = key_for  # the key a call would have now, on the run's current views
        self._run = run
        self._allow_discardable = allow_discardable
        self._may_dispatch = may_dispatch
        self._matched: dict[str, int] = {}  # capability -> write occurrences matched so far
        self._lost: set[str] = set()  # capabilities whose writes no longer match occurrences
        self.started = 0  # reads started on a new view, for tests and the report

    def written(self, capability: str, key: CallKey | None) -> int:
        """The Guest's call that may write ``capability`` (formal key ``key``; None when it
        could not be bound) has returned or failed: start the reads that follow it.

        Returns how many reads were started.
        """
        if capability in self._lost:
            return 0
        writes = sorted(
            (
                n
                for n in self._graph.nodes()
                if n.site.capability == capability
                and n.effect.may_write
                and not n.dead
                and not n.provisional
            ),
            key=lambda n: n.order,
        )
        done = self._matched.get(capability, 0)
        if done >= len(writes) or not self._same(writes[done], key):
            self._lost.add(capability)
            return 0
        write = writes[done]
        self._matched[capability] = done + 1
        until = writes[done + 1].order if done + 1 < len(writes) else None
        count = 0
        for node in sorted(self._graph.nodes(), key=lambda n: n.order):
            if node.order <= write.order or (until is not None and node.order >= until):
                continue
            if node.site.capability != capability or not self._eligible(node):
                continue
            assert node.args is not None and node.kwargs is not None
            view_key = self._key_for(capability, node.site.method, node.args, node.kwargs)
            if view_key is None:
                continue
            if self._lane.start_on_view(view_key, _bound(self._run, node)) is not None:
                count += 1
        self.started += count
        return count

    def _same(self, write: Node, key: CallKey | None) -> bool:
        """Whether the Guest's write may be the occurrence ``write``."""
        if write.discardable:
            return False  # taken or not: cannot tell which write the Guest made
        if write.key is None or key is None:
            return write.args is None  # arguments unknown to discovery: take it on trust
        k = write.key
        return (k.capability, k.method, k.version, k.arguments) == (
            key.capability,
            key.method,
            key.version,
            key.arguments,
        )

    def _eligible(self, node: Node) -> bool:
        """A read discovery kept from the root only because of a write before it."""
        if node.state is not State.INELIGIBLE or node.pre_write or not node.effect.speculable:
            return False
        if node.provisional:
            return False  # its real occurrence is the one to follow
        if node.args is None or node.kwargs is None or node.dead:
            return False
        if node.discardable and not self._allow_discardable:
            return False
        return self._may_dispatch is None or self._may_dispatch(node)


def _bound(run: RunOnView, node: Node) -> Callable[[Observation], Awaitable[object]]:
    def start(obs: Observation) -> Awaitable[object]:
        return run(node, obs)

    return start
