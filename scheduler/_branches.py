"""Speculative branch writes: a run's writes to its private branch, early, on a layer.

A capability whose writes land in a run-private copy-on-write branch (the built-in
``Workspace``, or anything implementing the branch protocol of ``pysolate._layers``) makes
a write discardable work, like a read: performed on a *speculative layer* of the branch, it
reaches nothing until a Guest call claims it, and the layer is simply dropped otherwise.
DESIGN.md, contract 2, allows exactly this, under the rules this module enforces:

- **Program order.** Per capability, the speculative writes are its write occurrences in
  program order, each started only once its arguments are known, every earlier write
  occurrence of the capability has been speculated, and that one's layer is complete (its
  key is computed on the view that layer shows). A write under an undecided branch or with
  unknown arguments waits, one still streaming is taken once its statement is accepted; one that cannot be speculated (an
  ``unknown`` effect, past the branch's limits, no budget left) ends the chain for the run.
- **Versions.** Version 0 is a copy of the run's branch as the run began; the ``k``-th
  speculative write forks version ``k - 1`` into version ``k`` and runs there; a version is
  never written again once its write ended. A read after the ``k``-th write occurrence
  (and before the next) runs on version ``k``, keyed on what that version shows - or, while
  that version is still being written, on the latest complete one when the writes since
  cannot touch what it reads (declared scopes).
- **In-order claims.** The Guest's ``k``-th call that may write the capability claims the
  ``k``-th speculative write only if all earlier ones were claimed and its call key is
  exactly equal (the view included, so the branch is then in the state the write ran on);
  the branch then adopts version ``k``. The first call that does not claim discards the
  layer from version ``k`` on: the writes, and every read speculated on those versions, are
  dropped from the claim table (their view ids may recur on the branch with other content)
  and nothing more is speculated on the capability. The Guest's calls run normally from
  there, so the final branch, the call log and every value equal the sequential run's.
- **Nothing leaks.** A layer reaches the run's branch only through a claim; when the run
  ends (rejected, cut, cancelled, or the program simply made fewer writes) every unclaimed
  write and every read on a version past the claimed ones is ``discarded``.

Soundness rests on the claim alone (discovery may guess wrong, e.g. about the order of a
loop expanded late): an equal key on an equal state means the same outcome, because a
branch write is a deterministic function of the branch state and the call.

Prior art: speculative execution with in-order retirement (a CPU's reorder buffer commits
speculative stores in program order and squashes everything after the first mispredict).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from occurrences import CallKey, Effect, OccurrenceId

from ._observation import Observation
from ._state import State

if TYPE_CHECKING:
    from ._graph import EventGraph, Node
    from ._lane import SpeculativeLane


def _order(node: Node) -> int:
    return node.order


class Layers(Protocol):
    """One run's speculative layers of its branch capabilities (``pysolate._layers``).

    Versions are numbered per capability as in the module docstring.
    """

    def key(self, capability: str, version: int, method: str, args: tuple[object, ...], kwargs: Mapping[str, object]) -> CallKey | None:
        """The call's key on ``version`` (None when it cannot be bound)."""
        ...

    def admits(self, capability: str, version: int, method: str, args: tuple[object, ...], kwargs: Mapping[str, object]) -> bool:
        """Whether the write may run early on a fork of ``version`` (the branch's limits)."""
        ...

    def fork(self, capability: str, version: int) -> int:
        """Make version ``version + 1`` as a copy of ``version``; returns its number."""
        ...

    def run(self, capability: str, version: int, node: Node, obs: Observation) -> Awaitable[object]:
        """Execute ``node``'s call on ``version`` (a write on the fork made for it)."""
        ...

    def adopt(self, capability: str, version: int) -> None:
        """The run's branch takes the state of ``version`` (its writes were claimed)."""
        ...

    def independent(self, capability: str, write: Node, read: Node) -> bool:
        """Whether ``read`` certainly cannot see what ``write`` does (disjoint scopes)."""
        ...

    def claimable(self, obs: Observation) -> bool:
        """Whether a settled write may be claimed (not when its outcome is unknown)."""
        ...


@dataclass(slots=True, eq=False)
class _Chain:
    """One capability's speculative writes and the reads on their layers."""

    capability: str
    nodes: list[Node] = field(default_factory=list)  # its accepted occurrences, by ``order``
    writes: list[Observation] = field(default_factory=list)  # k-th write made version k + 1
    write_nodes: list[OccurrenceId] = field(default_factory=list)  # parallel to ``writes``
    reads: list[Observation] = field(default_factory=list)  # obs.layer: the version read
    started: set[OccurrenceId] = field(default_factory=set)  # reads started (by occurrence)
    claimed: int = 0  # writes claimed; the run's branch is at version ``claimed``
    closed: bool = False  # nothing more is speculated
    lost: bool = False  # a Guest write did not claim: nothing more is claimed either


@dataclass(frozen=True, slots=True)
class BranchStatistics:
    """An immutable snapshot: speculative writes started, claimed and discarded; reads
    started on layers."""

    writes: int
    claimed: int
    discarded: int
    reads: int


class BranchSpeculation:
    """Speculates the writes (and the reads after them) of a run's branch capabilities.

    Synchronous and not thread-safe, like the graph: ``pump`` runs wherever the lane's does
    (``SpeculativeLane.on_close`` marks what is left ``discarded``); ``claim_write`` from the
    run's broker, one Guest call at a time.
    """

    def __init__(
        self,
        graph: EventGraph,
        lane: SpeculativeLane,
        layers: Layers,
        capabilities: Iterable[str],
        *,
        allow_discardable: bool = False,
        may_dispatch: Callable[[Node], bool] | None = None,
    ) -> None:
        self._graph = graph
        self._lane = lane
        self._layers = layers
        self._chains = {name: _Chain(name) for name in capabilities}
        self._allow_discardable = allow_discardable
        self._may_dispatch = may_dispatch
        self._seen = 0  # graph nodes sorted into their chains so far
        lane.on_close(self.finish)

    def branched(self, capability: str) -> bool:
        """Whether ``capability``'s writes go through ``claim_write``."""
        return capability in self._chains

    # -- speculating ------------------------------------------------------------------

    def pump(self) -> None:
        """Start every write and layer read that has become possible (program order)."""
        if all(c.closed for c in self._chains.values()):
            return
        for node in itertools.islice(self._graph.nodes(), self._seen, None):
            chain = self._chains.get(node.site.capability)
            # A provisional node (of the statement still streaming) is never speculated
            # here: its accepted occurrence comes later in ``order``, once the statement is.
            if chain is not None and not node.provisional:
                bisect.insort(chain.nodes, node, key=_order)
            self._seen += 1
        for chain in self._chains.values():
            if not chain.closed:
                self._walk(chain, chain.nodes)

    def _walk(self, chain: _Chain, nodes: list[Node]) -> None:
        passed = 0  # write occurrences passed; the reads after them are on version ``passed``
        for node in nodes:
            if node.dead or node.state is State.DROPPED:
                continue
            if node.effect.may_write:
                if passed < len(chain.writes):
                    if chain.write_nodes[passed] != node.id:
                        chain.closed = True  # a write found before one already started
                        return
                    passed += 1
                    continue
                if not self._start_write(chain, node, passed):
                    return
                passed += 1
            elif self._readable(chain, node):
                version = self._readable_version(chain, node, passed)
                if version is not None:  # else: what it reads is still being written
                    self._start_read(chain, node, version)

    def _start_write(self, chain: _Chain, node: Node, version: int) -> bool:
        """Start ``node`` as the next write on a fork of ``version``; False to stop the walk
        (it must wait, or the chain closed)."""
        if node.effect is not Effect.WRITE:
            chain.closed = True  # an ``unknown`` call: never early, and every write after it waits for it
            return False
        if node.discardable or node.args is None or node.kwargs is None:
            return False  # may still turn certain, or its arguments known
        if version and not chain.writes[version - 1].done.is_set():
            return False
        if self._may_dispatch is not None and not self._may_dispatch(node):
            return False
        cap, method = chain.capability, node.site.method
        key = self._layers.key(cap, version, method, node.args, node.kwargs)
        if key is None or not self._layers.admits(cap, version, method, node.args, node.kwargs):
            chain.closed = True
            return False
        made = version + 1
        obs = self._lane.start_on_layer(key, made, self._bound(cap, made, node))
        if obs is None:  # budget spent, lane closed, or an equal key already started
            chain.closed = True
            return False
        # Before the write's task first runs (``start_on_layer`` only schedules it).
        forked = self._layers.fork(cap, version)
        assert forked == made, "forks are made in program order"
        chain.writes.append(obs)
        chain.write_nodes.append(node.id)
        return True

    def _readable(self, chain: _Chain, node: Node) -> bool:
        """A read that only a write of its capability keeps from the root (the lane runs
        the pre-write ones there), not yet started, with known arguments."""
        if node.id in chain.started or node.pre_write or not node.effect.speculable:
            return False
        if node.args is None or node.kwargs is None:
            return False
        if node.discardable and not self._allow_discardable:
            return False
        return self._may_dispatch is None or self._may_dispatch(node)

    def _readable_version(self, chain: _Chain, node: Node, version: int) -> int | None:
        """The version ``node`` (a read after ``version`` writes) can run on now: its own,
        once written, or an earlier complete one when no write since may touch what it reads
        (declared scopes: it then shows the same); None while it must wait."""
        done = version
        while done and not chain.writes[done - 1].done.is_set():
            done -= 1
        if done == version:
            return version
        cap = chain.capability
        pending = (self._graph.node(chain.write_nodes[j]) for j in range(done, version))
        return done if all(self._layers.independent(cap, write, node) for write in pending) else None

    def _start_read(self, chain: _Chain, node: Node, version: int) -> None:
        assert node.args is not None and node.kwargs is not None
        chain.started.add(node.id)
        key = self._layers.key(chain.capability, version, node.site.method, node.args, node.kwargs)
        if key is None:
            return
        obs = self._lane.start_on_layer(key, version, self._bound(chain.capability, version, node))
        if obs is not None:
            chain.reads.append(obs)

    def _bound(self, capability: str, version: int, node: Node) -> Callable[[Observation], Awaitable[object]]:
        def start(obs: Observation) -> Awaitable[object]:
            return self._layers.run(capability, version, node, obs)

        return start

    # -- claiming ---------------------------------------------------------------------

    async def claim_write(self, capability: str, key: CallKey) -> Observation | None:
        """The Guest's next call that may write ``capability`` (key ``key``) is being made:
        the settled speculative write it claims (the branch has then adopted its layer;
        the caller hands back its value or re-raises its error), or None (the caller runs
        the call; the layer is discarded from here on).

        Cancellation while waiting for the write propagates; nothing is claimed then.
        """
        chain = self._chains.get(capability)
        if chain is None or chain.lost:
            return None
        k = chain.claimed
        if k >= len(chain.writes) or chain.writes[k].key != key:
            self._discard_from(chain, k)
            return None
        obs = chain.writes[k]
        await obs.done.wait()
        if not obs.settled or not self._layers.claimable(obs):
            self._discard_from(chain, k)
            return None
        self._layers.adopt(capability, k + 1)
        chain.claimed = k + 1
        obs.claims += 1
        return obs

    def _discard_from(self, chain: _Chain, k: int) -> None:
        """Drop the layer from version ``k + 1`` on: the writes from the ``k``-th, the reads
        of the versions they made; speculate and claim nothing more on the capability."""
        chain.closed = chain.lost = True
        for obs in chain.writes[k:]:
            self._lane.discard(obs)
        for obs in chain.reads:
            if obs.layer is not None and obs.layer > k:
                self._lane.discard(obs)

    def finish(self) -> None:
        """The run is over: what no Guest call claimed is ``discarded`` with its layer."""
        for chain in self._chains.values():
            chain.closed = True
            for obs in chain.writes[chain.claimed :]:
                obs.discarded = True
            for obs in chain.reads:
                if obs.layer is not None and obs.layer > chain.claimed:
                    obs.discarded = True

    def statistics(self) -> BranchStatistics:
        chains = self._chains.values()
        return BranchStatistics(
            writes=sum(len(c.writes) for c in chains),
            claimed=sum(c.claimed for c in chains),
            discarded=sum(1 for c in chains for o in (*c.writes, *c.reads) if o.discarded),
            reads=sum(len(c.reads) for c in chains),
        )
