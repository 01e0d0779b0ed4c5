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

Each walk hands out fresh generations (``add_provisional``'s ``generations``) and says
which earlier ones it supersedes: all of them when the statement is walked afresh; only
the tail's of the last walk when an unfinished ``for`` is resumed (``_resume``), so that
each new line of a long loop body costs that line, not the block.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace

from ._bindings import Known, Origins, Scope
from ._control import DiscoverySink, _Branch, _Context, _Decision, _Exit, _Leave
from ._discovery import Discovery
from ._flow import _loop_context
from ._model import MethodSpec, Occurrence, OccurrenceId
from ._prior import PriorGlobals
from ._resume import Iteration, LoopWalk, capture, continues, restore, same_statement


def provisional_generation(occurrence_id: OccurrenceId) -> int | None:
    """The generation of a provisional occurrence, or None for a real one."""
    path = occurrence_id.path
    if path and isinstance(path[0], tuple) and path[0][0] == 0:
        return path[0][1]
    return None


class _Watched:
    """The sink, noting whether a walk found a call that may write."""

    __slots__ = ("sink", "wrote")

    def __init__(self, sink: DiscoverySink) -> None:
        self.sink = sink
        self.wrote = False

    def discovered(self, occurrence: Occurrence) -> None:
        self.wrote = self.wrote or occurrence.effect.may_write
        self.sink.discovered(occurrence)

    def arguments_known(
        self, occurrence_id: OccurrenceId, args: tuple[object, ...], kwargs: dict[str, object]
    ) -> None:
        self.sink.arguments_known(occurrence_id, args, kwargs)

    def arguments_unknown(self, occurrence_id: OccurrenceId) -> None:
        self.sink.arguments_unknown(occurrence_id)

    def control_changed(self, occurrence_id: OccurrenceId, discardable: bool, dead: bool) -> None:
        self.sink.control_changed(occurrence_id, discardable, dead)


class ProvisionalDiscovery(Discovery):
    """``Discovery`` that can also read provisional statements (``add_provisional``)."""

    def __init__(
        self,
        capabilities: Mapping[str, Mapping[str, MethodSpec]],
        sink: DiscoverySink,
        prior: PriorGlobals | None = None,
    ) -> None:
        super().__init__(capabilities, sink, prior)
        self._loop: LoopWalk | None = None  # the last walk, if it may be resumed
        self._recording: LoopWalk | None = None  # the loop being walked afresh
        self._generations: dict[int, None] = {}  # handed out for the statement and not superseded
        self._next: Callable[[], int] | None = None  # during add_provisional

    def add_statements(self, statements: Iterable[ast.stmt]) -> None:
        self._loop, self._generations = None, {}
        super().add_statements(statements)

    def add_provisional(
        self, statements: Iterable[ast.stmt], generations: Callable[[], int], limit: tuple[int, int]
    ) -> list[int]:
        """Discover the occurrences of provisional ``statements``, leaving the accepted
        program's bindings, writes and budget untouched; return the earlier generations
        they supersede. ``generations()`` hands out a new generation (at least 1);
        ``limit``: (line, UTF-8 column) where the model's text ends in this parse.

        Results of real occurrences still decide their branches and arguments; results of
        provisional ones (``result_known``) reach only provisional dependents.
        """
        statements = list(statements)
        expansions, seconds, global_names = (
            self._expansions,
            self._expansion_seconds,
            set(self._global_names),
        )
        sink, watched = self._sink, _Watched(self._sink)
        self._sink, self._next = watched, generations
        try:
            walk = self._loop
            node = continues(walk, statements) if walk is not None else None
            if walk is not None and node is not None:
                superseded = self._resume(walk, node, limit)
                if superseded is not None:
                    return superseded
            return self._afresh(statements, limit)
        finally:
            self._sink, self._next = sink, None
            if watched.wrote:
                self._loop = None
            self._expansions, self._expansion_seconds = expansions, seconds
            self._global_names = global_names

    def _generation(self) -> int:
        assert self._next is not None
        generation = self._next()
        self._generations[generation] = None
        return generation

    def _afresh(self, statements: list[ast.stmt], limit: tuple[int, int]) -> list[int]:
        superseded, self._generations = list(self._generations), {}
        generation = self._generation()
        top = self._top
        overlay = Scope(top.scope)
        ctx = replace(
            top, scope=overlay, globals=overlay, written=top.written.copy(), path=((0, generation),)
        )
        only = statements[0] if len(statements) == 1 else None
        self._recording = (
            LoopWalk(only, limit) if isinstance(only, ast.For) and not only.orelse else None
        )
        try:
            for stmt in statements:
                try:
                    self._stmt(stmt, ctx)
                except RecursionError:
                    self._recording = None
                    self._give_up(stmt, ctx)
            walk = self._recording
            self._loop = walk if walk is not None and walk.expanded and walk.resumable else None
        finally:
            self._recording = None
        return superseded

    # -- a loop walked afresh, recorded ---------------------------------------------------

    def _expand_for(
        self, node: ast.For, items: list[object], origins: Origins, overlay: Scope, ctx: _Context
    ) -> bool:
        walk = self._recording
        if walk is None or walk.node is not node or walk.expanded:
            return super()._expand_for(node, items, origins, overlay, ctx)
        if not self._may_expand(len(items)):
            return False
        walk.expanded = True
        with self._expanding():
            self._record(walk, node, items, origins, overlay, ctx)
        return True

    def _record(
        self,
        walk: LoopWalk,
        node: ast.For,
        items: list[object],
        origins: Origins,
        overlay: Scope,
        ctx: _Context,
    ) -> None:
        """``_iterate`` for the loop still streaming, recording each iteration's points;
        the last body statement (the tail) gets a generation of its own."""
        exit_, base = _loop_context(node, overlay, ctx)
        walk.body, walk.final, walk.overlay, walk.exit_ = (
            node.body,
            len(node.body) - 1,
            overlay,
            exit_,
        )
        walk.tail = self._generation()
        first = ctx.path[0]
        for index, item in enumerate(items):
            if not self._may_expand(0):
                self._opaque(ctx)  # out of time: as ``_iterate``
                walk.resumable = False
                return
            reached = _Branch(frozenset(), _Decision.LIVE)
            start = replace(base, path=(first, index), branches=(*ctx.branches, reached))
            it = Iteration(index, start, reached)
            walk.iterations.append(it)
            start = self._maybe_exited(start, exit_)
            self._assign(node.target, Known(item, origins), start)
            if self._run(
                walk, it, start, node.body[: walk.final], node.body[walk.final :], walk.tail
            ):
                return
            if exit_.maybe:
                self._merge(overlay, base)

    # -- a loop resumed ---------------------------------------------------------------

    def _resume(self, walk: LoopWalk, node: ast.For, limit: tuple[int, int]) -> list[int] | None:
        """Walk only what ``node`` adds to ``walk``'s loop, in each iteration from its
        recorded point; the generations superseded (None: it cannot be resumed)."""
        assert walk.overlay is not None and walk.exit_ is not None
        body, final = node.body, walk.final
        grown = len(body) - 1
        # The old tail is final now and unchanged: resume after it, and keep its occurrences.
        after = grown > final and same_statement(walk.body[final], body[final], walk.limit)
        if after:
            new_final, superseded = body[final + 1 : grown], []
        else:
            new_final, superseded = body[final:grown], [walk.tail]
            if walk.broken and walk.iterations[-1].left_in_tail:
                return None  # the break may not be there any more, and what follows it was never walked
        generation = self._generation() if new_final else 0
        tail = self._generation()
        exit_ = walk.exit_
        carried = False  # a new statement may have left the loop in an earlier iteration
        with self._expanding():
            for position, it in enumerate(walk.iterations):
                if not self._may_expand(0):
                    walk.resumable = False
                    break
                if it.left is not None and (after or not it.left_in_tail):
                    if it.left is ast.Break:
                        break
                    it.final, it.left_in_tail = None, False  # (its tail is final now)
                    continue  # the new statements are past a ``continue``
                point = it.after if after else it.final
                assert point is not None
                it.left, it.left_in_tail = None, False
                exit_.maybe = point.maybe or carried
                start = restore(
                    point, walk.overlay, it.ctx, ((0, generation if new_final else tail), it.index)
                )
                if self._run(
                    walk, it, self._maybe_exited(start, exit_), new_final, body[grown:], tail
                ):
                    for later in walk.iterations[position + 1 :]:
                        self._unreachable(later)
                    del walk.iterations[position + 1 :]
                    break
                carried = carried or exit_.maybe
        for old in superseded:
            del self._generations[old]
        walk.body, walk.final, walk.tail, walk.limit = body, grown, tail, limit
        return superseded

    def _run(
        self,
        walk: LoopWalk,
        it: Iteration,
        ctx: _Context,
        final: list[ast.stmt],
        tail: list[ast.stmt],
        tail_generation: int,
    ) -> bool:
        """Walk ``final`` then ``tail`` in iteration ``it`` from ``ctx``, taking its points;
        True when a certain ``break`` ended the loop there."""
        assert walk.overlay is not None and walk.exit_ is not None
        exit_ = walk.exit_
        it.final = it.after = None
        try:
            if final:
                ctx = self._walk(final, ctx, exit_)
            it.final = capture(walk.overlay, ctx, exit_)
            if ctx.path[0] != (0, tail_generation):
                ctx = replace(ctx, path=((0, tail_generation), it.index))
            ctx = self._walk(tail, ctx, exit_)
            it.after = capture(walk.overlay, ctx, exit_)
        except _Leave as leave:
            if leave.kind is ast.Return:
                raise
            it.left, it.left_in_tail = leave.kind, it.final is not None
            if leave.kind is ast.Break:
                walk.broken = True
                return True
        return False

    def _walk(self, statements: list[ast.stmt], ctx: _Context, exit_: _Exit) -> _Context:
        """``_body``, returning the context it ended in."""
        for stmt in statements:
            self._stmt(stmt, ctx)
            ctx = self._maybe_exited(ctx, exit_)
        return ctx

    @staticmethod
    def _maybe_exited(ctx: _Context, exit_: _Exit) -> _Context:
        if exit_.maybe and exit_.branch not in ctx.branches:
            return replace(ctx, branches=(*ctx.branches, exit_.branch))
        return ctx

    def _unreachable(self, it: Iteration) -> None:
        """A ``break`` before iteration ``it`` is certain now: what it found is dead."""
        it.reached.decision = _Decision.DEAD
        for member in it.reached.members:
            discardable, dead = self._control_of(self._branches_of[member])
            self._sink.control_changed(member, discardable, dead)
