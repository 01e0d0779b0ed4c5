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

from ..evaluator import BUILTINS, UNKNOWN, bound_names, free_names, walk
from ..plain import fresh_copy
from ._bindings import (
    Binding,
    CapabilityRef,
    Derived,
    FunctionRef,
    Known,
    MethodRef,
    ModuleRef,
    Mutated,
    Origins,
    Scope,
    data_origins,
    evaluate_in,
    is_immutable,
    origins_of,
    producers_of,
    resolve,
    union_origins,
)
from ._control import (
    MAX_EXPANSION_SECONDS,
    MAX_EXPANSIONS,
    OPAQUE_BUILTINS,
    DiscoverySink,
    _Branch,
    _Context,
    _Decision,
    _substitute,
    _truth,
    _Waiter,
)
from ._model import FUNCTIONS, MethodSpec, OccurrenceId
from ._prior import PRIOR_ORIGIN, PriorGlobals
from ._scopes import Written

MAX_PASSES = 3
"""Most passes over a loop body not expanded before its last, forget-everything pass."""

MAX_REPEATED_NESTING = 2
"""Deepest nesting of loops not expanded that get more than that last pass (each level
multiplies the passes of the ones inside it)."""


class _Effects:
    """State and binding rules shared by expression and statement handling."""

    def __init__(
        self,
        capabilities: Mapping[str, Mapping[str, MethodSpec]],
        sink: DiscoverySink,
        prior: PriorGlobals | None = None,
    ) -> None:
        self._capabilities = capabilities
        self._sink = sink
        names: dict[str, Binding] = {
            name: CapabilityRef(name) for name in capabilities if name != FUNCTIONS
        }
        # A function tool is a method of the FUNCTIONS capability under a global name.
        names.update({name: MethodRef(FUNCTIONS, name) for name in capabilities.get(FUNCTIONS, ())})
        if prior is not None:
            for name in prior.opaque:
                # Anything reached through it is code discovery does not follow.
                names[name] = ModuleRef(f"<earlier turn: {name}>", reflective=True)
            for name, value in prior.known.items():
                shared = frozenset() if is_immutable(value) else frozenset({PRIOR_ORIGIN})
                names[name] = Known(fresh_copy(value), shared)
        module = Scope(None, names)
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
        self._repeating = 0  # nesting of code being followed repeatedly (``_repeatedly``)

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
        for inner in walk(node):
            if isinstance(inner, ast.Call):
                func = inner.func.value if isinstance(inner.func, ast.Attribute) else inner.func
                called.add(id(func))
        for inner in walk(node):
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

    def _derive(
        self, expr: ast.expr, captured: dict[str, Binding], names: frozenset[str] | None = None
    ) -> Binding:
        """The binding of ``expr`` over ``captured``: known now, or once its results are.

        ``names``: ``free_names(expr)``, when the caller has it already (it is not cheap)."""
        producers: frozenset[OccurrenceId] = frozenset()
        for b in captured.values():
            p = producers_of(b)
            if p:
                producers = producers | p
        # The value may contain (alias) what it reads, plus whatever it creates itself.
        origins = union_origins(
            [*map(origins_of, captured.values()), frozenset({self._origin(expr)})]
        )
        if producers:
            # Stays a Derived even when every result is in, so what depends on it (is a
            # condition known? may a function be expanded?) never depends on timing.
            derived = Derived(expr, captured, producers, origins)
            if all(p in self._results for p in producers):
                resolve(derived, self._results)  # memoize now: keeps resolution chains short
            return derived
        value = evaluate_in(expr, captured, self._results)
        if value is UNKNOWN:
            return _unknown_value(expr, captured, origins, names)
        return Known(value, origins)

    def _value(
        self, node: ast.expr, ctx: _Context, subst: dict[int, tuple[str, Binding]]
    ) -> Binding:
        hit = subst.get(id(node))
        if hit is not None:
            return hit[1]
        synthetic: dict[str, Binding] = {}
        if subst:
            replaced = _substitute(node, {k: name for k, (name, _) in subst.items()})
            assert isinstance(replaced, ast.expr)
            node = replaced
            synthetic = dict(subst.values())
        captured: dict[str, Binding] = {}
        names = free_names(node)
        for name in names:
            b = synthetic.get(name) if name in synthetic else ctx.scope.lookup(name)
            if b is not None:
                captured[name] = b
        return self._derive(node, captured, names)

    @staticmethod
    def _scopes(ctx: _Context) -> tuple[Scope, ...]:
        return (ctx.scope,) if ctx.globals is ctx.scope else (ctx.scope, ctx.globals)

    def _mutated(self, ctx: _Context, origins: Origins = None, received: Origins = None) -> None:
        """Something with ``origins`` may have changed in place, taking in values with
        ``received`` origins: no value that may share structure with it is known any more
        (with ``None``: no possibly-mutable value).

        Such a value keeps its origins (``Mutated``), grown by ``received``, so that
        mutating it later forgets only what may share structure with it. (Code that may
        run again after aliases it creates is followed until that settles: ``_repeatedly``.)"""
        if origins is not None and not origins:
            return  # nothing in it can change
        for scope in self._scopes(ctx):
            for name, b in scope.mutable_visible():
                theirs = origins_of(b)
                if origins is None or theirs is None or origins & theirs:
                    grown = union_origins((theirs, received))
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
        """Back from code that may not have run, or may have stopped anywhere (or run
        again): every name it bound is unknown; a capability it aliased is no longer
        trusted (also one aliased only for a while: it may have stopped there). A name
        that held only data, before and at every point of it, keeps what its values may
        share structure with (``Mutated``): it holds one of them."""
        for capability in sorted(overlay.aliased):
            self._distrust(capability, ctx)
        for name in overlay.assigned - exclude:
            origins = overlay.seen.get(name)
            before = overlay.parent.lookup(name) if overlay.parent is not None else None
            if before is not None:
                origins = union_origins((origins, data_origins(before)))
            ctx.scope.bind(name, UNKNOWN if origins is None else Mutated(origins))

    def _repeatedly(
        self, walk: Callable[[], None], overlay: Scope, dry: _Context, nodes: Iterable[ast.AST]
    ) -> None:
        """Collect the effects of code that may run any number of times (a loop body not
        expanded): ``walk`` follows one run over ``overlay`` with ``dry`` (nothing reported).

        A later run starts where an earlier one left: passes repeat, each from what every
        name may hold by then (what the passes so far assigned it, ``_merge``), until a
        pass neither assigns a new name nor lets one share structure with more. Values
        created in these passes get one origin per expression (``_origin``), the same in
        every pass, so that this ends. Past ``MAX_PASSES`` passes, or nested more than
        ``MAX_REPEATED_NESTING`` deep, one last pass starts with every container and every
        name ``nodes`` bind forgotten (and with unknown code having run if such a name
        holds a capability, module or function)."""
        self._repeating += 1
        try:
            if self._repeating <= MAX_REPEATED_NESTING:
                state: dict[str, Origins] | None = None
                for _ in range(MAX_PASSES):
                    walk()
                    self._merge(overlay, dry)
                    now = {name: origins_of(overlay.local.get(name)) for name in overlay.assigned}
                    if state is not None and _within(now, state):
                        return
                    state = now
            self._mutated(dry)
            for name in bound_names(nodes):
                if isinstance(
                    dry.scope.lookup(name), CapabilityRef | MethodRef | ModuleRef | FunctionRef
                ):
                    self._opaque(dry)
                dry.scope.bind(name, UNKNOWN)
            walk()
        finally:
            self._repeating -= 1

    def _origin(self, node: ast.AST) -> object:
        """A new origin tag for a value created at ``node``: one per evaluation, but one
        per position while code is followed repeatedly (all its runs' values share it)."""
        if self._repeating:
            return (
                "at",
                getattr(node, "lineno", 0),
                getattr(node, "col_offset", 0),
                type(node).__name__,
            )
        self._fresh += 1
        return self._fresh

    @staticmethod
    def _control_of(branches: Iterable[_Branch]) -> tuple[bool, bool]:
        discardable = dead = False
        for b in branches:
            discardable |= b.decision is _Decision.UNDECIDED
            dead |= b.decision is _Decision.DEAD
        return discardable, dead

    def _decider(
        self, test: Binding, if_true: list[_Branch], if_false: list[_Branch]
    ) -> Callable[[], None]:
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


def _unknown_value(
    expr: ast.expr, captured: Mapping[str, Binding], origins: Origins, names: frozenset[str] | None
) -> Binding:
    """The binding of ``expr`` when its value is not known (``names``: its free names, if
    already computed).

    ``name``, ``name[i]``, ``name.attr`` ... of a ``Mutated`` value is part of it: it
    shares its origins. Otherwise a value computed only from data (names bound to data,
    pure builtins, no code of its own, no dunder attribute) can only hold those values and
    objects it creates: it shares ``origins``. Anything else may be anything."""
    root = expr
    while isinstance(root, ast.Subscript | ast.Attribute):
        root = root.value
    if isinstance(root, ast.Name) and isinstance(captured.get(root.id), Mutated):
        return captured[root.id]
    if origins is None:
        return UNKNOWN
    for inner in walk(expr):
        if isinstance(
            inner,
            ast.Lambda | ast.NamedExpr | ast.Await | ast.Yield | ast.YieldFrom | ast.GeneratorExp,
        ):
            return UNKNOWN
        if isinstance(inner, ast.Attribute) and inner.attr.startswith("__"):
            return UNKNOWN
    for name in free_names(expr) if names is None else names:
        b = captured.get(name)
        if b is None:
            if name not in BUILTINS or name in OPAQUE_BUILTINS:
                return UNKNOWN
        elif data_origins(b) is None:
            return UNKNOWN
    return Mutated(origins)


def _within(now: Mapping[str, Origins], before: Mapping[str, Origins]) -> bool:
    """Whether every name in ``now`` was in ``before`` sharing structure with no more."""
    for name, origins in now.items():
        if name not in before:
            return False
        old = before[name]
        if old is not None and (origins is None or not origins <= old):
            return False
    return True
