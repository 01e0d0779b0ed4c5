"""Discovery's state and the effects statements have on what it knows.

The base of ``Discovery``: the results that have arrived and the work waiting for them
(one counter per waiting dependent, so an arriving result costs its own dependents only),
deriving values from bindings, and the ways knowledge is lost - a mutation (only what may
share structure with the mutated value), unknown code (everything), a capability escaping
(it is no longer trusted), code that may not have run (what it bound is unknown), and a
branch decided by a result. See ``_discovery`` for the rules as a whole.
"""

from __future__ import annotations

import ast
import contextlib
import time
from collections.abc import Callable, Iterable, Iterator, Mapping

from ._bindings import (
    Binding,
    CapabilityRef,
    Derived,
    Known,
    MethodRef,
    Mutated,
    Origins,
    Scope,
    data_origins,
    evaluate_in,
    may_be_mutable,
    origins_of,
    producers_of,
    resolve,
    union_origins,
)
from ._control import (
    MAX_EXPANSION_SECONDS,
    MAX_EXPANSIONS,
    DiscoverySink,
    _Branch,
    _Context,
    _Decision,
    _truth,
    _Waiter,
)
from ._evaluator import UNKNOWN
from ._model import MethodSpec, OccurrenceId
from ._scopes import Written


class _Effects:
    """State and binding rules shared by expression and statement handling."""

    def __init__(self, capabilities: Mapping[str, Mapping[str, MethodSpec]], sink: DiscoverySink) -> None:
        self._capabilities = capabilities
        self._sink = sink
        module = Scope(None, {name: CapabilityRef(name) for name in capabilities})
        self._top = _Context(module, module, Written(), (), (), (), emit=True)
        # Results of producers, UNKNOWN for those that failed or will never run.
        self._results: dict[OccurrenceId, object] = {}
        # Work waiting for results: each waiter is listed once per missing producer.
        self._waiting: dict[OccurrenceId, list[_Waiter]] = {}
        self._order = 0  # occurrences discovered so far
        self._fresh = 0  # origin tags handed out (see ``Origins``)
        self._expansions = 0  # expansion work so far (see MAX_EXPANSIONS)
        self._expansion_seconds = 0.0  # spent in finished outermost expansions
        self._expanding_since: float | None = None  # start of the outermost one running
        self._global_names: set[str] = set()  # names some function declares ``global``
        self._branches_of: dict[OccurrenceId, tuple[_Branch, ...]] = {}

    # -- expansion budget ---------------------------------------------------------------

    def _may_expand(self, work: int) -> bool:
        """Charge ``work`` units of expansion; False, charging nothing, past either budget."""
        elapsed = self._expansion_seconds
        if self._expanding_since is not None:
            elapsed += time.perf_counter() - self._expanding_since
        if self._expansions + work > MAX_EXPANSIONS or elapsed >= MAX_EXPANSION_SECONDS:
            return False
        self._expansions += work
        return True

    @contextlib.contextmanager
    def _expanding(self) -> Iterator[None]:
        """Time the outermost expansion running (nested ones are inside its time)."""
        if self._expanding_since is not None:
            yield
            return
        self._expanding_since = time.perf_counter()
        try:
            yield
        finally:
            self._expansion_seconds += time.perf_counter() - self._expanding_since
            self._expanding_since = None

    # -- results and waiting ------------------------------------------------------------

    def _settle(self, occurrence_id: OccurrenceId, value: object) -> None:
        if occurrence_id in self._results:
            return
        self._results[occurrence_id] = value
        for waiter in self._waiting.pop(occurrence_id, ()):
            waiter.pending -= 1
            if waiter.pending == 0:
                # Nested too deeply to follow: what it would discover stays undiscovered.
                with contextlib.suppress(RecursionError):
                    waiter.run()

    def _when_known(self, producers: frozenset[OccurrenceId], run: Callable[[], None]) -> None:
        missing = [p for p in producers if p not in self._results]
        if not missing:
            run()
            return
        waiter = _Waiter(len(missing), run)
        for p in missing:
            self._waiting.setdefault(p, []).append(waiter)

    def _give_up(self, node: ast.stmt, ctx: _Context) -> None:
        """A statement nested too deeply to follow (``RecursionError``): assume the worst of
        it, using only iterative walks. Every capability it names other than to call it is
        no longer trusted, every name it binds is unknown, and it may have written or
        mutated anything."""
        ctx.written.update(self._capabilities)
        self._mutated(ctx)
        called = set()
        for inner in ast.walk(node):
            if isinstance(inner, ast.Call):
                func = inner.func.value if isinstance(inner.func, ast.Attribute) else inner.func
                called.add(id(func))
        for inner in ast.walk(node):
            if isinstance(inner, ast.Name):
                b = ctx.scope.lookup(inner.id)
                if isinstance(b, CapabilityRef | MethodRef) and id(inner) not in called:
                    self._distrust(b.capability, ctx)
                if not isinstance(inner.ctx, ast.Load):
                    ctx.scope.bind(inner.id, UNKNOWN)
            elif isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                ctx.scope.bind(inner.name, UNKNOWN)
            elif isinstance(inner, ast.alias):
                ctx.scope.bind(inner.asname or inner.name.split(".")[0], UNKNOWN)
            elif isinstance(inner, ast.Global | ast.Nonlocal):
                self._declare_global(set(inner.names), ctx)

    # -- bindings and effects -----------------------------------------------------------

    def _bind(self, name: str, binding: Binding, ctx: _Context) -> None:
        ctx.scope.bind(name, binding)
        if not ctx.emit:
            ctx.scope.seen[name] = None  # followed once for code that may run again

    def _derive(self, expr: ast.expr, captured: dict[str, Binding]) -> Binding:
        """The binding of ``expr`` over ``captured``: known now, or once its results are."""
        producers: frozenset[OccurrenceId] = frozenset()
        for b in captured.values():
            p = producers_of(b)
            if p:
                producers = producers | p
        # The value may contain (alias) what it reads, plus whatever it creates itself.
        self._fresh += 1
        origins = union_origins([*map(origins_of, captured.values()), frozenset({self._fresh})])
        if producers:
            # Stays a Derived even when every result is in, so what depends on it (is a
            # condition known? may a function be expanded?) never depends on timing.
            derived = Derived(expr, captured, producers, origins)
            if all(p in self._results for p in producers):
                resolve(derived, self._results)  # memoize now: keeps resolution chains short
            return derived
        value = evaluate_in(expr, captured, self._results)
        if value is UNKNOWN:
            return _part_of_mutated(expr, captured)
        return Known(value, origins)

    @staticmethod
    def _scopes(ctx: _Context) -> tuple[Scope, ...]:
        return (ctx.scope,) if ctx.globals is ctx.scope else (ctx.scope, ctx.globals)

    def _mutated(self, ctx: _Context, origins: Origins = None, received: Origins = None) -> None:
        """Something with ``origins`` may have changed in place, taking in values with
        ``received`` origins: no value that may share structure with it is known any more
        (with ``None``: no possibly-mutable value).

        Where code is followed exactly (``ctx.emit``) such a value keeps its origins, grown
        by ``received``, so that mutating it later forgets only what may share structure
        with it. Code followed once for its effects (a loop body not expanded) may run
        again after aliases it creates, so there it forgets them too."""
        for scope in self._scopes(ctx):
            for name, b in list(scope.visible()):
                if may_be_mutable(b):
                    theirs = origins_of(b)
                    if origins is None or theirs is None or origins & theirs:
                        grown = union_origins((theirs, received)) if ctx.emit else None
                        scope.bind(name, UNKNOWN if grown is None else Mutated(grown))

    def _opaque(self, ctx: _Context) -> None:
        """Code this module does not follow runs here: it may call any capability (so
        every capability is on a new view), mutate anything, and rebind the names that
        some function declares ``global``."""
        ctx.written.update(self._capabilities)
        self._mutated(ctx)
        for name in self._global_names:
            for scope in self._scopes(ctx):
                scope.bind(name, UNKNOWN)

    def _distrust(self, capability: str, ctx: _Context) -> None:
        """The capability escaped to code this module does not follow: stop trusting every
        name bound to it, and treat it as possibly written."""
        ctx.written.add(capability)
        for scope in self._scopes(ctx):
            for name, b in list(scope.visible()):
                if isinstance(b, CapabilityRef | MethodRef) and b.capability == capability:
                    scope.bind(name, UNKNOWN)

    def _declare_global(self, names: set[str], ctx: _Context) -> None:
        self._global_names |= names
        for name in names:
            for scope in self._scopes(ctx):
                scope.bind(name, UNKNOWN)

    def _merge(self, overlay: Scope, ctx: _Context, exclude: frozenset[str] = frozenset()) -> None:
        """Back from code that may not have run (or not exactly as followed): every name
        it bound is unknown; a capability it aliased is no longer trusted.

        Where that code was followed exactly, a name that held only data, before and at
        every point of it, keeps what its values may share structure with (``Mutated``):
        it holds one of them."""
        for name in overlay.assigned - exclude:
            b = overlay.local.get(name)
            if isinstance(b, CapabilityRef | MethodRef):
                self._distrust(b.capability, ctx)
            origins = overlay.seen.get(name) if ctx.emit else None
            before = overlay.parent.lookup(name) if overlay.parent is not None else None
            if before is not None:
                origins = union_origins((origins, data_origins(before)))
            ctx.scope.bind(name, UNKNOWN if origins is None else Mutated(origins))

    @staticmethod
    def _control_of(branches: Iterable[_Branch]) -> tuple[bool, bool]:
        discardable = dead = False
        for b in branches:
            discardable |= b.decision is _Decision.UNDECIDED
            dead |= b.decision is _Decision.DEAD
        return discardable, dead

    def _decider(self, test: Binding, if_true: list[_Branch], if_false: list[_Branch]) -> Callable[[], None]:
        def decide() -> None:
            decided = _truth(resolve(test, self._results))
            if decided is None:
                return
            for branch in if_true:
                branch.decision = _Decision.LIVE if decided else _Decision.DEAD
            for branch in if_false:
                branch.decision = _Decision.DEAD if decided else _Decision.LIVE
            for branch in (*if_true, *if_false):
                for member in branch.members:
                    discardable, dead = self._control_of(self._branches_of[member])
                    self._sink.control_changed(member, discardable, dead)

        return decide


def _part_of_mutated(expr: ast.expr, captured: Mapping[str, Binding]) -> Binding:
    """``name``, ``name[i]``, ``name.attr`` ... of a ``Mutated`` value: unknown, but only
    part of that value, so it shares its origins (a receiver being mutated again, say)."""
    while isinstance(expr, ast.Subscript | ast.Attribute):
        expr = expr.value
    if isinstance(expr, ast.Name):
        b = captured.get(expr.id)
        if isinstance(b, Mutated):
            return b
    return UNKNOWN
