"""The incremental event graph and its ready frontier.

Prior art: LLMCompiler's task-fetching unit (a task is dispatched as soon as its inputs
are satisfied; the planner streams tasks so early ones start before the plan is complete).
Here the "plan" is the program itself, read by ``occurrences.Discovery`` as statements are
accepted; the graph holds one node per occurrence, data and control edges, and a lifecycle
per node (``_state``).

Cost model (the frontier must keep up with a token stream): every update costs time
proportional to the node's own edges, never to the graph's size. Readiness is driven by
pending-result counters (kept by discovery's waiters, one per dependent, decremented
as results arrive), dedup by a dict keyed by ``CallKey``, and the frontier is a queue of
newly ready nodes. No topological sort, ``ancestors`` or scan of the graph happens on any
update; networkx measured at 1-7k updates/s with those, 130k+/s without.

Invariants:

- a node is handed out by ``take_ready`` only when ``READY``: its key is known, its effect
  is speculable and it is pre-write. Discardable ones are handed out too, marked; the
  dispatcher decides. A node is handed out once, plus once more if it was discardable,
  was not dispatched, and its branch then turned out taken. A ``READY`` node (handed out
  or not, but not dispatched) whose branch turns out dead is ``DROPPED``;
- of nodes with equal keys, only the first to become ready is handed out; the others
  follow it and complete or fail with it (a non-discardable node never follows a
  discardable or provisional one, so it is never held back by a branch that may die);
- *provisional* nodes come from a statement that is still streaming
  (``add_provisional``): found in its complete inner statements and elements, they are
  tentative - the rest of the statement may still change what encloses them - and they are
  superseded by a newer parse of the statement or when the next statements are accepted:
  those not dispatched are ``DROPPED``, dispatched ones keep their observation, which an
  equal-key occurrence of the newer description joins (a follower here, or in the lane).
  A provisional call that ends after the text the model wrote (closed by the repair) is
  ``INELIGIBLE``;
- *dead work is released at once*: a dispatched node that can no longer be reached (its
  branch died, or it was superseded and nothing newer wants its call: ``_release``) is
  *withdrawn*, handed to the lane (``take_withdrawn``) in the same update, which cancels
  its early call so it stops holding a slot;
- a result reaches discovery once per node (leader and followers alike), after which the
  dependents' arguments are evaluated again.
"""

from __future__ import annotations

import ast
import weakref
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import MappingProxyType

import networkx as nx

from occurrences import (
    CallKey,
    MethodSpec,
    Occurrence,
    OccurrenceId,
    Pending,
    PriorGlobals,
    ProvisionalDiscovery,
    fresh_copy,
    provisional_generation,
)

from ._node import GraphStatistics as GraphStatistics
from ._node import Node as Node
from ._release import DeadWork
from ._state import DISPOSITIONS, State, transition

KeyFn = Callable[[str, str, tuple[object, ...], dict[str, object]], CallKey | None]
"""``key_for(capability, method, args, kwargs)``: the call key, or None when the call
cannot be bound to the method's signature (then it is never eligible)."""

_FAILED = object()  # outcome of a node that failed


class EventGraph:
    """Occurrences of one run, their dependencies, and the frontier of ready ones.

    Synchronous and not thread-safe: call it from one task (the run's coordinator).
    """

    def __init__(
        self,
        capabilities: Mapping[str, Mapping[str, MethodSpec]],
        key_for: KeyFn,
        prior: PriorGlobals | None = None,
    ) -> None:
        """``prior``: the globals earlier turns of a session left (discovery starts from them)."""
        self._key_for = key_for
        self._graph: nx.DiGraph = nx.DiGraph()
        self._nodes: dict[OccurrenceId, Node] = {}
        self._counts: dict[State, int] = dict.fromkeys(State, 0)
        self._queue: list[Node] = []  # became READY, not handed out yet
        self._handed: set[OccurrenceId] = set()
        # First ready node per key; later equal keys follow it.
        self._leaders: dict[CallKey, Node] = {}
        # Outcomes already delivered: a result value, or _FAILED.
        self._outcomes: dict[OccurrenceId, object] = {}
        # Results for discovery, delivered after the current call into discovery returns.
        self._notices: deque[tuple[OccurrenceId, object]] = deque()
        self._discovery = ProvisionalDiscovery(capabilities, _Sink(self), prior)
        self._generation = 0  # provisional parses discovered so far
        self._limits: dict[int, tuple[int, int]] = {}  # generation -> end of the model's text
        self._limit = (0, 0)  # the end of the model's text in the parse being discovered
        self._parses = 0  # provisional parses discovered so far
        self._parse_of: dict[int, int] = {}  # generation -> the parse that handed it out
        # Live (not superseded) provisional generations and their nodes. A generation not
        # here and not above ``_generation`` is superseded for good.
        self._live: dict[int, list[Node]] = {}
        self._release = DeadWork(
            self._nodes, self._leaders, self._live
        )  # dispatched work gone dead

    # -- feeding ------------------------------------------------------------------------

    def add_statements(self, statements: Sequence[ast.stmt]) -> None:
        """Discover the occurrences of newly accepted top-level statements (in order); the
        provisional nodes found so far are superseded first."""
        self._supersede(list(self._live))
        self._discovery.add_statements(statements)
        self._flush()
        self._release.review()

    def add_provisional(self, pending: Pending) -> None:
        """Discover the occurrences of a provisional parse of the statement still streaming
        (``PrefixParser.pending``). Nothing of it is accepted; see the module docstring.
        The parses it supersedes (all earlier ones, or when an unfinished loop is resumed
        only its last tail's: ``occurrences.discovery._resume``) are superseded once it is
        discovered, so its occurrences follow the earlier equal-key ones (and take over
        from those never dispatched)."""
        self._limit = pending.limit
        self._parses += 1
        superseded = self._discovery.add_provisional(
            pending.statements, self._new_generation, pending.limit
        )
        self._flush()
        self._supersede(superseded)
        self._flush()
        self._release.review()

    def _new_generation(self) -> int:
        self._generation += 1
        self._limits[self._generation] = self._limit
        self._parse_of[self._generation] = self._parses
        self._live[self._generation] = []
        return self._generation

    def _supersede(self, generations: Sequence[int]) -> None:
        """A newer description of the statement exists: what those provisional parses
        found and never ran is dropped (all first, then their followers take over, so an
        heir is never one dropped in the same step); what they ran is reviewed."""
        dropped: list[Node] = []
        for generation in generations:
            for node in self._live.pop(generation, ()):
                if node.state in (State.DISCOVERED, State.BLOCKED, State.READY, State.FOLLOWING):
                    self._move(node, State.DROPPED)
                    self._never(node)
                    dropped.append(node)
                elif node.state is State.DISPATCHED:
                    self._release.suspect(node)
        for node in dropped:
            self._promote(node, superseded=True)

    def take_ready(self) -> list[Node]:
        """Nodes that became ready since the last call, in program order.

        Each node once - plus once more if it was handed out discardable, not dispatched,
        and its branch then turned out taken. Nodes handed out but never dispatched stay
        ``READY`` (the dispatcher declined them) until dropped with a dead branch.
        """
        batch = [n for n in self._queue if n.state is State.READY]
        self._queue.clear()
        batch.sort(key=lambda n: n.order)
        self._handed.update(n.id for n in batch)
        return batch

    def mark_dispatched(self, node_id: OccurrenceId) -> None:
        """The node's early execution started.

        Raises:
            IllegalTransition: the node is not ``READY``.
        """
        self._move(self._nodes[node_id], State.DISPATCHED)

    def complete(self, node_id: OccurrenceId, result: object) -> None:
        """The node's early execution returned ``result`` (not mutated or kept by the graph
        beyond a fresh copy); its followers complete with it, dependents may become ready.

        Raises:
            IllegalTransition: the node is not ``DISPATCHED``.
        """
        node = self._nodes[node_id]
        self._move(node, State.COMPLETED)
        value = fresh_copy(result)
        self._deliver(node, value)
        for follower_id in node.followers:
            follower = self._nodes[follower_id]
            if follower.state is State.FOLLOWING:
                self._move(follower, State.COMPLETED)
                self._deliver(follower, value)
        self._flush()
        self._release.review()

    def fail(self, node_id: OccurrenceId) -> None:
        """The node's early execution raised: it and its followers failed; what reads their
        results stays unknown (the Guest raises the error where it makes the call).

        Raises:
            IllegalTransition: the node is not ``DISPATCHED``.
        """
        node = self._nodes[node_id]
        self._move(node, State.FAILED)
        self._deliver(node, _FAILED)
        for follower_id in node.followers:
            follower = self._nodes[follower_id]
            if follower.state is State.FOLLOWING:
                self._move(follower, State.FAILED)
                self._deliver(follower, _FAILED)
        self._flush()
        self._release.review()

    def settle(self, node_id: OccurrenceId, disposition: State | str) -> None:
        """Record the end of the node's early work: claimed, cancelled, late or orphaned.

        Raises:
            ValueError: ``disposition`` is not one of those four.
            IllegalTransition: the node cannot end that way from its state.
        """
        target = State(disposition)
        if target not in DISPOSITIONS:
            raise ValueError(f"not a disposition: {target.value}")
        node = self._nodes[node_id]
        self._move(node, target)
        if target is State.CANCELLED:
            self._promote(node)

    def take_withdrawn(self) -> list[OccurrenceId]:
        """Dispatched nodes found unreachable since the last call (see the module
        docstring), each once: their early work may stop. They stay ``DISPATCHED``; the
        lane settles them with their observation's disposition."""
        return self._release.take()

    # -- reading ------------------------------------------------------------------------

    def node(self, node_id: OccurrenceId) -> Node:
        """The node for ``node_id``; raises ``KeyError`` if there is none."""
        return self._nodes[node_id]

    def nodes(self) -> Iterator[Node]:
        """Every node, in program order of discovery."""
        return iter(self._nodes.values())

    @property
    def provisional_generation(self) -> int | None:
        """The latest provisional parse (``add_provisional``, numbered from 1), whose nodes
        describe the statement still streaming; None once statements were accepted after it
        (its nodes are superseded)."""
        return self._parses if self._generation in self._live else None

    def provisional_parse(self, node: Node) -> int | None:
        """The provisional parse that found ``node`` (None for an accepted one). One parse
        may hand out several generations (``occurrences.discovery._provisional``)."""
        generation = provisional_generation(node.id)
        return None if generation is None else self._parse_of[generation]

    @property
    def graph(self) -> nx.DiGraph:
        """A read-only view of the networkx graph (edge attribute ``kind``: data/control)."""
        return self._graph.copy(as_view=True)

    def statistics(self) -> GraphStatistics:
        return GraphStatistics(
            nodes=len(self._nodes),
            edges=self._graph.number_of_edges(),
            states=MappingProxyType(dict(self._counts)),
            queued=sum(1 for n in self._queue if n.state is State.READY),
            handed_out=len(self._handed),
        )

    # -- internals ----------------------------------------------------------------------

    def _move(self, node: Node, target: State) -> None:
        previous = node.state
        node.state = transition(previous, target)
        self._counts[previous] -= 1
        self._counts[target] += 1

    def _deliver(self, node: Node, outcome: object) -> None:
        self._outcomes[node.id] = outcome
        self._notices.append((node.id, outcome))

    def _never(self, node: Node) -> None:
        """The node will never run early: what reads its result is unknown for good."""
        self._notices.append((node.id, _FAILED))

    def _flush(self) -> None:
        while self._notices:
            node_id, outcome = self._notices.popleft()
            if outcome is _FAILED:
                self._discovery.result_unknown(node_id)
            else:
                self._discovery.result_known(node_id, outcome)

    def _add(self, occurrence: Occurrence) -> None:
        node = Node(
            occurrence.id,
            occurrence.effect,
            occurrence.pre_write,
            occurrence.discardable,
            occurrence.dead,
            occurrence.order,
        )
        if node.id in self._nodes:
            raise AssertionError(f"occurrence discovered twice: {node.id}")
        generation = provisional_generation(node.id)
        synthetic = False
        if generation is not None:
            node.provisional = True
            node.unsure = any(type(p) is int and p > 0 for p in node.id.path[1:])
            site = node.site
            synthetic = node.synthetic = (site.end_lineno, site.end_col_offset) > self._limits[
                generation
            ]
            live = self._live.get(generation)
            if live is not None:
                live.append(node)
        if generation is None or generation in self._live:
            self._release.place(node)
        self._nodes[node.id] = node
        self._counts[State.DISCOVERED] += 1
        self._graph.add_node(node.id)
        for producer in occurrence.control_deps:
            self._graph.add_edge(producer, node.id, kind="control")
        for producer in occurrence.data_deps:
            self._graph.add_edge(producer, node.id, kind="data")
        if occurrence.dead or (generation is not None and generation not in self._live):
            self._move(node, State.DROPPED)  # (or found late, by a superseded parse)
            if not occurrence.dead:
                self._never(node)
        elif synthetic:
            self._move(node, State.INELIGIBLE)  # closed by the repair: not the model's call
            self._never(node)
        elif not (occurrence.effect.speculable and occurrence.pre_write):
            self._move(node, State.INELIGIBLE)
        elif any(p not in self._outcomes for p in occurrence.data_deps):
            self._move(node, State.BLOCKED)

    def _arguments_known(
        self, node_id: OccurrenceId, args: tuple[object, ...], kwargs: dict[str, object]
    ) -> None:
        node = self._nodes[node_id]
        node.args, node.kwargs = args, kwargs
        # Computed for every node, so a node's key never depends on when its branch was decided.
        key = node.key = self._key_for(node.site.capability, node.site.method, args, kwargs)
        if node.state not in (State.DISCOVERED, State.BLOCKED):
            return  # ineligible or dropped: arguments and key are informative only
        if key is None:
            self._move(node, State.INELIGIBLE)
            self._never(node)
            return
        self._move(node, State.READY)
        self._enter_frontier(node)

    def _enter_frontier(self, node: Node) -> None:
        assert node.key is not None
        leader = self._leaders.get(node.key)
        if leader is not None and (node.tentative or not leader.tentative):
            self._move(node, State.FOLLOWING)
            node.leader = leader.id
            leader.followers.append(node.id)
            outcome = self._outcomes.get(leader.id, None)
            if leader.id in self._outcomes:
                self._move(node, State.FAILED if outcome is _FAILED else State.COMPLETED)
                self._deliver(node, outcome)
            return
        self._leaders[node.key] = node
        self._queue.append(node)

    def _arguments_unknown(self, node_id: OccurrenceId) -> None:
        node = self._nodes[node_id]
        if node.state in (State.DISCOVERED, State.BLOCKED):
            self._move(node, State.INELIGIBLE)
            self._never(node)

    def _control_changed(self, node_id: OccurrenceId, discardable: bool, dead: bool) -> None:
        node = self._nodes[node_id]
        was_discardable = node.discardable
        node.discardable, node.dead = discardable, dead
        if dead:
            if node.state in (State.DISCOVERED, State.BLOCKED, State.READY, State.FOLLOWING):
                self._move(node, State.DROPPED)
                self._never(node)
                self._promote(node)
            elif node.state is State.DISPATCHED:
                self._release.suspect(node)
        elif (
            was_discardable
            and not discardable
            and node.state is State.READY
            and node.id in self._handed
        ):
            # Handed out as discardable and not dispatched (the policy may refuse
            # discardable work): now certain, it is offered once more.
            self._handed.discard(node.id)
            self._queue.append(node)
        elif was_discardable and not discardable and node.state is State.FOLLOWING:
            self._lead_if_certain(node)

    def _lead_if_certain(self, node: Node) -> None:
        """A node that just became certain must not wait on a discardable leader that was
        never dispatched (the policy may never run it): it takes over as leader, and the
        old leader and its other followers follow it."""
        assert node.leader is not None and node.key is not None
        leader = self._nodes[node.leader]
        if leader.state is not State.READY or not leader.tentative or node.tentative:
            return
        rest = [f for f in leader.followers if f != node.id]
        self._move(leader, State.FOLLOWING)
        self._move(node, State.READY)
        leader.leader, leader.followers = node.id, []
        node.leader, node.followers = None, [leader.id, *rest]
        for follower_id in rest:
            self._nodes[follower_id].leader = node.id
        self._leaders[node.key] = node
        self._handed.discard(leader.id)
        self._queue.append(node)

    def _promote(self, node: Node, superseded: bool = False) -> None:
        """``node`` will produce nothing: its first live follower takes over as leader.

        ``superseded``: ``node`` was dropped for a newer parse of its statement, which
        ``heir`` is part of. If ``node`` was handed out and not dispatched (the lane
        declined it), ``heir`` is taken as handed out too, unless it is less tentative
        (it is certain where ``node`` was discardable): offering the same call again per
        parse would cost the lane a refusal per parse for nothing."""
        if node.key is None or self._leaders.get(node.key) is not node:
            return
        del self._leaders[node.key]
        waiting = [
            f for f in map(self._nodes.__getitem__, node.followers) if f.state is State.FOLLOWING
        ]
        if not waiting:
            return
        heir, rest = waiting[0], waiting[1:]
        self._move(heir, State.READY)
        heir.leader = None
        heir.followers = [f.id for f in rest]
        for f in rest:
            f.leader = heir.id
        self._leaders[node.key] = heir
        if superseded and node.id in self._handed and heir.discardable >= node.discardable:
            self._handed.add(heir.id)
        else:
            self._queue.append(heir)

    def _current(self, node: Node) -> bool:
        """Not superseded: accepted, or of a live provisional parse."""
        return not node.provisional or provisional_generation(node.id) in self._live


class _Sink:
    """Discovery's view of the graph (keeps the sink methods off the public interface)."""

    __slots__ = ("_graph",)

    def __init__(self, graph: EventGraph) -> None:
        # A proxy: the graph owns discovery, which owns this sink; a strong reference back
        # would make every run's graph garbage that only a full collection frees.
        self._graph = weakref.proxy(graph)

    def discovered(self, occurrence: Occurrence) -> None:
        self._graph._add(occurrence)

    def arguments_known(
        self, occurrence_id: OccurrenceId, args: tuple[object, ...], kwargs: dict[str, object]
    ) -> None:
        self._graph._arguments_known(occurrence_id, args, kwargs)

    def arguments_unknown(self, occurrence_id: OccurrenceId) -> None:
        self._graph._arguments_unknown(occurrence_id)

    def control_changed(self, occurrence_id: OccurrenceId, discardable: bool, dead: bool) -> None:
        self._graph._control_changed(occurrence_id, discardable, dead)
