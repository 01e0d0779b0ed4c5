"""Speculative branch writes: a run's writes to its private branch, early, on a layer.

A capability whose writes land in a run-private copy-on-write branch (the built-in
``Workspace``, or anything implementing the branch protocol of ``pysolate._run._layers``) makes
a write discardable work, like a read: performed on a *speculative layer* of the branch, it
reaches nothing until a Guest call claims it, and the layer is simply dropped otherwise.
docs/contract.md, rule 2, allows exactly this, under the rules this module enforces:

- **Program order.** Per capability, the speculative writes are its write occurrences in
  program order: the accepted statements' (discovery order), then those of the newest
  provisional parse of the statement still streaming (``EventGraph.add_provisional``:
  the complete inner statements of an unfinished ``for``/``if``/``with``/``try``...,
  every iteration of a loop over known items, the complete elements of an unfinished
  expression), when the lane's policy allows provisional work. Each is started only
  once its arguments are known, every earlier write occurrence of the capability has been
  speculated, and that one's layer is complete (its key is computed on the view that layer
  shows). Only effect ``write`` runs, and only on a layer; the reads after a write are
  ``pure``/``immutable_read`` only. An ``unknown`` call, provisional or not, ends the
  chain for the run, and so does a write that cannot be speculated (past the branch's
  limits, no budget left).
- **What waits.** A write with unknown arguments waits, and so does every write after it.
  A write under an undecided branch (``discardable``: an ``if`` whose condition reads a
  result not yet known) waits too. Running it would be sound (the claim below decides),
  but a wrong guess is found out only by the Guest's claim, after the stream, when it is
  too late to speculate anything else: the capability's chain would be lost for the run,
  every later write and read after it running in the program. A call the provisional
  parse closed itself (``Node.synthetic``: its ``)`` is the repair's, not the model's)
  never runs; a write there stops the walk until its text has streamed.
- **Reconciliation.** A provisional occurrence is a guess about the program: a newer
  parse of the statement, or its acceptance, brings new occurrences in its place. Walking
  the chain again, the ``k``-th write occurrence found where the ``k``-th early write was
  started for another one continues the chain when it is certain and its key on the same
  version is exactly equal (the same call on the same state: the early write stands for
  it). Otherwise - the loop ``break``s sooner, an ``if`` added a write before it, a name
  it reads was rebound later in the body, an ``unknown`` call appeared - the early writes
  from the ``k``-th on are *retracted* (never a claimed one; a claim waiting for one of
  them finds it discarded and claims nothing) together with every read on the versions
  they made, all ``discarded`` and out of the claim table, and the walk goes on from
  ``lineage[k]`` with what the program now says. A write that vanished with nothing after it is simply never claimed. A mismatch
  before the claimed writes (discovery found the program's past changed, a loop expanded
  late) closes the chain as before.
- **Versions.** Version 0 is a copy of the run's branch as the run began; the ``k``-th
  speculative write forks the version the ``k - 1`` writes before it made, under a new
  number (``Layers.fork``: numbers are never reused, so a retracted version is never
  forked or read again), and runs there; a version is never written again once its write
  ended. ``_Chain.lineage[k]`` is the version after ``k`` writes. A read after the ``k``-th
  write occurrence (and before the next) runs on ``lineage[k]``, keyed on what that
  version shows - or, while that version is still being written or its write is still
  queued (certain, arguments known, waiting only for the layer before it), on the latest
  complete one when the writes since cannot touch what it reads (declared scopes).
- **In-order claims.** The Guest's ``k``-th call that may write the capability claims the
  ``k``-th speculative write only if all earlier ones were claimed and its call key is
  exactly equal (the view included, so the branch is then in the state the write ran on);
  the branch then adopts ``lineage[k + 1]``. The first call that does not claim discards the
  layer from ``lineage[k]`` on: the writes, and every read speculated on those versions, are
  dropped from the claim table (their view ids may recur on the branch with other content)
  and nothing more is speculated on the capability. The Guest's calls run normally from
  there, so the final branch, the call log and every value equal the sequential run's.
- **Nothing leaks.** A layer reaches the run's branch only through a claim; when the run
  ends (rejected, cut, cancelled, or the program simply made fewer writes) every unclaimed
  write and every read on a version past the claimed ones is ``discarded``.

Soundness rests on the in-order exact-key claim alone, never on discovery (which may guess
wrong: a provisional parse, a loop expanded late): an equal key on an equal state means
the same outcome, because a branch write is a deterministic function of the branch state
and the call, and the branch reaches the state a write ran on only by claiming every write
before it. Reconciliation only makes the guesses better before the Guest runs; a guess it
leaves wrong costs discarded work, never a different result.

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
    """One run's speculative layers of its branch capabilities (``pysolate._run._layers``).

    A version is named by the number ``fork`` gave it (0: the run's branch as it began).
    """

    def key(
        self,
        capability: str,
        version: int,
        method: str,
        args: tuple[object, ...],
        kwargs: Mapping[str, object],
    ) -> CallKey | None:
        """The call's key on ``version`` (None when it cannot be bound)."""
        ...

    def admits(
        self,
        capability: str,
        version: int,
        method: str,
        args: tuple[object, ...],
        kwargs: Mapping[str, object],
    ) -> bool:
        """Whether the write may run early on a fork of ``version`` (the branch's limits)."""
        ...

    def fork(self, capability: str, version: int) -> int:
        """Make a new version as a copy of ``version``; returns its number, greater than
        that of every version made before (numbers are never reused)."""
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
    pending: list[Node] = field(default_factory=list)  # those of provisional parse ``generation``
    generation: int = 0
    writes: list[Observation] = field(default_factory=list)  # the k-th made version lineage[k + 1]
    write_nodes: list[OccurrenceId] = field(default_factory=list)  # parallel to ``writes``
    lineage: list[int] = field(default_factory=lambda: [0])  # version after k writes: lineage[k]
    newest: int = 0  # the highest version number made so far
    retracted: list[Observation] = field(default_factory=list)  # withdrawn writes (``_retract``)
    reads: list[Observation] = field(default_factory=list)  # obs.layer: the version read
    started: set[OccurrenceId] = field(default_factory=set)  # reads tried (by occurrence)
    claimed: int = 0  # writes claimed; the run's branch is at version ``lineage[claimed]``
    closed: bool = False  # nothing more is speculated
    lost: bool = False  # a Guest write did not claim: nothing more is claimed either


@dataclass(frozen=True, slots=True)
class BranchStatistics:
    """An immutable snapshot: speculative writes started (retracted ones included), claimed
    and discarded; reads started on layers."""

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
        """Provisional occurrences are speculated when the lane's policy allows them
        (``LanePolicy.provisional``); ``allow_discardable`` applies to reads only (a write
        under an undecided branch always waits, the module docstring says why)."""
        self._graph = graph
        self._lane = lane
        self._layers = layers
        self._chains = {name: _Chain(name) for name in capabilities}
        self._allow_discardable = allow_discardable
        self._allow_provisional = lane.policy.provisional
        self._may_dispatch = may_dispatch
        self._seen = 0  # graph nodes sorted into their chains so far
        lane.on_close(self.finish)

    def branched(self, capability: str) -> bool:
        """Whether ``capability``'s writes go through ``claim_write``."""
        return capability in self._chains

    # -- speculating ------------------------------------------------------------------

    def pump(self) -> None:
        """Start every write and layer read that has become possible (program order), and
        reconcile the early writes with what the program now says."""
        if all(c.closed for c in self._chains.values()):
            return
        for node in itertools.islice(self._graph.nodes(), self._seen, None):
            chain = self._chains.get(node.site.capability)
            if chain is not None:
                _sort(chain, node, self._graph.provisional_parse(node))
            self._seen += 1
        live = self._graph.provisional_generation if self._allow_provisional else None
        for chain in self._chains.values():
            if not chain.closed:
                # The statement still streaming follows every accepted one; an older parse
                # of it, or one superseded by its acceptance, says nothing any more.
                pending = chain.pending if live is not None and chain.generation == live else ()
                self._walk(chain, itertools.chain(chain.nodes, pending))

    def _walk(self, chain: _Chain, nodes: Iterable[Node]) -> None:
        passed = 0  # write occurrences passed; the reads after them are on lineage[passed]
        queued: list[Node] = []  # writes after those, each waiting only for the layer before it
        for node in nodes:
            if node.dead or node.state is State.DROPPED:
                continue
            if node.synthetic:  # closed by the repair, not the model's call: never run
                if node.effect.may_write:
                    return  # and the write the model is writing there is not known yet
                continue
            if node.effect.may_write:
                if not queued:
                    if passed < len(chain.writes):
                        if chain.write_nodes[passed] == node.id or self._reconcile(
                            chain, node, passed
                        ):
                            passed += 1
                            continue
                    elif self._start_write(chain, node, passed):
                        passed += 1
                        continue
                if (
                    chain.closed
                    or passed != len(chain.writes)
                    or not self._queued(chain, node, passed)
                ):
                    return
                queued.append(node)
            elif self._readable(chain, node):
                version = self._readable_version(chain, node, passed, queued)
                if version is not None:  # else: what it reads is still being written
                    self._start_read(chain, node, chain.lineage[version])

    def _reconcile(self, chain: _Chain, node: Node, k: int) -> bool:
        """``node`` is now the ``k``-th write occurrence, where the ``k``-th early write was
        started for another one (a provisional occurrence: ``node`` is its accepted twin,
        or a newer parse of it; or the program changed). It continues the chain when it is
        certain and its key on the same version is exactly equal: then it is the same call
        on the same state. Otherwise the early writes from the ``k``-th on are retracted and
        ``node`` is tried in their place. False to stop the walk."""
        if k < chain.claimed:
            chain.closed = True  # discovery found the program's past changed (a loop expanded late)
            return False
        if node.effect is Effect.WRITE and not node.discardable:
            if node.args is None or node.kwargs is None:
                return False  # not known yet: the early write stands until it is
            key = self._layers.key(
                chain.capability, chain.lineage[k], node.site.method, node.args, node.kwargs
            )
            if key is not None and key == chain.writes[k].key:
                chain.write_nodes[k] = node.id
                return True
        self._retract(chain, k)
        return self._start_write(chain, node, k)

    def _retract(self, chain: _Chain, k: int) -> None:
        """Withdraw the early writes from the ``k``-th on (none is claimed) and the reads on
        the versions they made: ``discarded``, out of the claim table (those view ids may
        recur with other content on the versions made in their place), their versions never
        forked again. The reads after them are tried again on the new versions."""
        assert k >= chain.claimed, "a claimed write is never withdrawn"
        self._drop_layers(chain, k)
        chain.retracted.extend(chain.writes[k:])
        del chain.writes[k:], chain.write_nodes[k:], chain.lineage[k + 1 :]
        chain.started.clear()  # those still in the claim table are found there and not redone

    def _start_write(self, chain: _Chain, node: Node, k: int) -> bool:
        """Start ``node`` as the ``k``-th write, on a fork of ``lineage[k]``; False to stop
        the walk (it must wait, or the chain closed)."""
        if node.effect is not Effect.WRITE:
            # an ``unknown`` call: never early, and every write after it waits for it
            chain.closed = True
            return False
        if node.discardable or node.args is None or node.kwargs is None:
            return False  # may still turn certain, or its arguments known
        if k and not chain.writes[k - 1].done.is_set():
            return False
        if self._may_dispatch is not None and not self._may_dispatch(node):
            return False
        cap, method, base = chain.capability, node.site.method, chain.lineage[k]
        key = self._layers.key(cap, base, method, node.args, node.kwargs)
        if key is None or not self._layers.admits(cap, base, method, node.args, node.kwargs):
            chain.closed = True
            return False
        # Forked before the write's task first runs (``start_on_layer`` only schedules it).
        made = self._layers.fork(cap, base)
        assert made > chain.newest, "a version number is never reused"
        chain.newest = made
        obs = self._lane.start_on_layer(key, made, self._bound(cap, made, node))
        if obs is None:  # budget spent, lane closed, or an equal key already started
            chain.closed = True
            return False
        chain.writes.append(obs)
        chain.write_nodes.append(node.id)
        chain.lineage.append(made)
        return True

    def _queued(self, chain: _Chain, node: Node, k: int) -> bool:
        """Whether ``node``, the next write after ``k`` started ones, waits only for the
        ``k``-th to end: a certain write with known arguments, which the walk may pass to
        start the reads after it that it cannot touch (``_readable_version``)."""
        if (
            node.effect is not Effect.WRITE
            or node.discardable
            or node.args is None
            or node.kwargs is None
        ):
            return False
        if self._may_dispatch is not None and not self._may_dispatch(node):
            return False
        return bool(k) and not chain.writes[k - 1].done.is_set()

    def _readable(self, chain: _Chain, node: Node) -> bool:
        """A read that only a write of its capability keeps from the root (the lane runs
        the pre-write ones there), not yet tried, with known arguments."""
        if node.id in chain.started or node.pre_write or not node.effect.speculable:
            return False
        if node.args is None or node.kwargs is None:
            return False
        if node.discardable and not self._allow_discardable:
            return False
        return self._may_dispatch is None or self._may_dispatch(node)

    def _readable_version(
        self, chain: _Chain, node: Node, passed: int, queued: list[Node]
    ) -> int | None:
        """The position in the lineage ``node`` (a read after ``passed`` started writes and
        the ``queued`` ones) can run on now: its own, once written, or an earlier complete
        one when no write since may touch what it reads (declared scopes: it then shows the
        same); None while it must wait."""
        done = passed
        while done and not chain.writes[done - 1].done.is_set():
            done -= 1
        if done == passed and not queued:
            return passed
        cap = chain.capability
        pending = [*(self._graph.node(chain.write_nodes[j]) for j in range(done, passed)), *queued]
        return (
            done if all(self._layers.independent(cap, write, node) for write in pending) else None
        )

    def _start_read(self, chain: _Chain, node: Node, version: int) -> None:
        assert node.args is not None and node.kwargs is not None
        chain.started.add(node.id)
        key = self._layers.key(chain.capability, version, node.site.method, node.args, node.kwargs)
        if key is None:
            return
        obs = self._lane.start_on_layer(key, version, self._bound(chain.capability, version, node))
        if obs is not None:
            chain.reads.append(obs)

    def _bound(
        self, capability: str, version: int, node: Node
    ) -> Callable[[Observation], Awaitable[object]]:
        def start(obs: Observation) -> Awaitable[object]:
            return self._layers.run(capability, version, node, obs)

        return start

    # -- claiming ---------------------------------------------------------------------

    async def claim_write(self, capability: str, key: CallKey) -> Observation | None:
        """The Guest's next call that may write ``capability`` (key ``key``) is being made:
        the settled speculative write it claims (the branch has then adopted its layer;
        the caller hands back its value or re-raises its error), or None (the caller runs
        the call; the layer is discarded from here on). A write that has not begun (queued
        behind other early work) is withdrawn, never waited for: the Guest's own write runs.

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
        if not obs.done.is_set():
            if obs.probe.withdraw():  # not begun: the Guest's write runs now, not behind it
                self._discard_from(chain, k)
                return None
            await obs.done.wait()
        if obs.discarded or not obs.settled or not self._layers.claimable(obs):
            self._discard_from(chain, k)  # (discarded: retracted while it ran)
            return None
        self._layers.adopt(capability, chain.lineage[k + 1])
        chain.claimed = k + 1
        obs.claims += 1
        return obs

    def _discard_from(self, chain: _Chain, k: int) -> None:
        """Drop the layer from version ``lineage[k]`` on: the writes from the ``k``-th, the
        reads of the versions they made; speculate and claim nothing more on the capability."""
        chain.closed = chain.lost = True
        self._drop_layers(chain, k)

    def _drop_layers(self, chain: _Chain, k: int) -> None:
        """``discarded``: the early writes from the ``k``-th on and the reads of the versions
        they made (both ``_retract`` and ``_discard_from`` start here)."""
        for obs in chain.writes[k:]:
            self._lane.discard(obs)
        base = chain.lineage[k]
        for obs in chain.reads:
            if obs.layer is not None and obs.layer > base:
                self._lane.discard(obs)

    def finish(self) -> None:
        """The run is over: what no Guest call claimed is ``discarded`` with its layer."""
        for chain in self._chains.values():
            chain.closed = True
            for obs in chain.writes[chain.claimed :]:
                obs.discarded = True
            base = chain.lineage[chain.claimed]
            for obs in chain.reads:
                if obs.layer is not None and obs.layer > base:
                    obs.discarded = True

    def statistics(self) -> BranchStatistics:
        chains = self._chains.values()
        return BranchStatistics(
            writes=sum(len(c.writes) + len(c.retracted) for c in chains),
            claimed=sum(c.claimed for c in chains),
            discarded=sum(
                1 for c in chains for o in (*c.writes, *c.retracted, *c.reads) if o.discarded
            ),
            reads=sum(len(c.reads) for c in chains),
        )


def _sort(chain: _Chain, node: Node, generation: int | None) -> None:
    """File a node of ``chain``'s capability: accepted, or of provisional parse
    ``generation`` (only the newest parse's are kept: a parse that may write describes the
    whole statement still streaming, ``occurrences.discovery._resume``)."""
    if generation is None:
        bisect.insort(chain.nodes, node, key=_order)
        return
    if generation > chain.generation:
        chain.pending, chain.generation = [node], generation
    elif generation == chain.generation:
        bisect.insort(chain.pending, node, key=_order)
