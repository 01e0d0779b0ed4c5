"""Occurrence discovery: which capability calls the accepted prefix will make, with what.

Prior art: pyflakes' checker (handlers dispatched by node type, a safe fallback for the
rest, bindings as explicit objects) and LLMCompiler's streamed task list (a task is
dispatched as soon as its inputs exist). Unlike LLMCompiler nothing here plans: discovery
is a small abstract interpreter of the program's own top-level code, in program order,
that never runs anything. It reports to a sink (the event graph):

- each *occurrence* (one arrival at a call site ``capability.method(...)``) with its
  data dependencies (earlier occurrences whose results its arguments read), control
  dependencies (occurrences whose results decide an enclosing branch), effect and whether
  it is *pre-write* (no call that may write its capability precedes it);
- its arguments, as soon as they can be computed exactly - immediately, or when the
  results it reads arrive (``result_known``/``result_unknown``);
- changes of control: a branch whose condition became known is live or dead.

Exactness over coverage: whenever discovery cannot be sure what a name holds, it binds the
name to ``UNKNOWN``; whenever it cannot be sure a capability name still means the Host's
capability (rebound, deleted, declared ``global`` in a function, passed to other code), it
stops treating calls through that name as occurrences. A wrong guess could only cost a
wasted early read - the claim is the gate (DESIGN.md) - but a guess we know to be shaky
is not made.

The rules, each with a test in ``tests/occurrences/test_discovery.py``:

- Statements run in order; a call site's arguments are evaluated by the exact evaluator
  over the names bound so far; ``x = cap.m(...)`` binds ``x`` to that occurrence's result.
- Any statement that might mutate a value in place (a method call that is not known to be
  non-mutating, an item or attribute assignment, ``+=`` on a possible container, a library
  call handed a container, a call to program-defined or unknown code) makes every
  possibly-mutable binding ``UNKNOWN``: values may alias each other and the Host cannot
  see which.
- ``for`` over a known, bounded iterable expands one occurrence per iteration (path =
  iteration index); over a call result, the expansion waits for the result. ``while`` is
  never expanded. After any loop, names assigned in its body are ``UNKNOWN``.
- ``if`` with a known condition follows the live branch only; otherwise both branches'
  occurrences are discardable (resolved later if the condition reads results), and names
  assigned in either are ``UNKNOWN`` after it. ``break``/``continue``/``return`` are
  followed exactly where they certainly run; under an unresolved branch (or in code not
  followed) they make everything after them in the loop or function discardable.
  Operands that ``and``/``or``/``x if c else y`` may skip are discardable; ``except``
  clauses are discardable, and what a ``try`` body assigned is ``UNKNOWN`` after it.
- A function is expanded only when called with known arguments (bounded depth); its calls
  then get the calling position in their path.
- Calls that may write (``write``/``unknown`` effects, program-defined or unknown code)
  put the capability (all capabilities, for unknown code) on a new view: later reads are
  not pre-write. A ``live_read`` does not. Library imports are not unknown code; the
  reflective modules (``REFLECTIVE_MODULES``) are.
- Determinism: the graph's final shape never depends on when results arrive (a condition
  or loop that reads a result is always handled as pending, then resolved), nor on how the
  statements were chunked.
- Bounds: ``MAX_ITERATIONS`` per loop, ``MAX_CALL_DEPTH``, ``MAX_EXPANSIONS`` per run; a
  statement nested too deeply to walk recursively is assumed to do the worst.
"""

from __future__ import annotations

import ast
import contextlib
import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from ._bindings import (
    Binding,
    CapabilityRef,
    Derived,
    FunctionRef,
    Known,
    MethodRef,
    ModuleRef,
    Origins,
    Result,
    Scope,
    Unpacked,
    evaluate_in,
    evaluator_env,
    is_immutable,
    may_be_mutable,
    origins_of,
    producers_of,
    resolve,
    union_origins,
)
from ._effect import Effect
from ._evaluator import UNKNOWN, evaluate_call_arguments, free_names
from ._exceptions import NotKnown
from ._model import ControlFrame, ControlKind, MethodSpec, Occurrence, OccurrenceId, PathItem, Site
from ._pure import truth

MAX_ITERATIONS = 256
"""Most iterations one loop or comprehension is expanded into; longer ones are not expanded."""

MAX_CALL_DEPTH = 4
"""Deepest nesting of program-defined function calls that is expanded."""

MAX_EXPANSIONS = 4096
"""Most expansion work in one run: loop and comprehension iterations, function bodies, and
occurrences discovered inside them, all together. Past it nothing more is expanded and
calls inside expansions are not reported (their effects on views still count)."""

OPAQUE_BUILTINS = frozenset(
    {"eval", "exec", "compile", "globals", "locals", "vars", "getattr", "setattr",
     "delattr", "__import__", "breakpoint", "input", "open", "super", "type", "object"}
)
"""Builtins that can reach or run arbitrary code (including the capabilities by name)."""

REFLECTIVE_MODULES = frozenset(
    {"__main__", "builtins", "sys", "gc", "inspect", "importlib", "types", "ctypes", "code",
     "codeop", "pdb", "bdb", "runpy", "pickle", "copyreg", "shelve"}
)
"""Modules whose functions can reach the program's globals or frames, or run code named by
data: their calls are treated as unknown code (as are those of relative imports, the
program's own modules). Every other import is library code that can only mutate what it
is handed: even ``os`` or ``subprocess`` act on the Guest's sandbox, never on what a
capability read sees. (Program functions handed to library code are caught as escapes.)"""

NON_MUTATING_METHODS = frozenset(
    name
    for t in (str, bytes, tuple, int, float)
    for name in dir(t)
    if not name.startswith("_")
) | frozenset({"copy", "count", "index", "get", "keys", "values", "items", "fromkeys"})
"""Method names that do not change a plain receiver (every ``str``/``bytes``/``tuple``
method, and the read-only ``list``/``dict`` ones). None of them is also the name of a
mutating ``list``/``dict``/``set`` method."""


class DiscoverySink(Protocol):
    """Where discovery reports; the event graph implements it.

    Calls arrive in program order for ``discovered``; arguments and control changes may
    arrive later, from ``result_known``/``result_unknown``.
    """

    def discovered(self, occurrence: Occurrence) -> None: ...

    def arguments_known(
        self, occurrence_id: OccurrenceId, args: tuple[object, ...], kwargs: dict[str, object]
    ) -> None: ...

    def arguments_unknown(self, occurrence_id: OccurrenceId) -> None: ...

    def control_changed(self, occurrence_id: OccurrenceId, discardable: bool, dead: bool) -> None: ...


class _Decision(enum.Enum):
    UNDECIDED = "undecided"
    LIVE = "live"
    DEAD = "dead"


@dataclass(slots=True, eq=False)
class _Branch:
    """One side of a choice discovery cannot make yet (maybe never)."""

    producers: frozenset[OccurrenceId]  # results that decide it (empty: never decided)
    decision: _Decision = _Decision.UNDECIDED
    members: list[OccurrenceId] = field(default_factory=list)  # occurrences under it


@dataclass(slots=True)
class _Context:
    """Where a statement runs: its scope and the state of its timeline."""

    scope: Scope
    globals: Scope  # the module scope as this code sees it (differs inside functions)
    written: set[str]  # capabilities on a new view from here on (shared along one timeline)
    path: tuple[PathItem, ...]
    control: tuple[ControlFrame, ...]  # lexical: recorded in sites
    branches: tuple[_Branch, ...]  # dynamic: decides discardable/dead
    emit: bool  # False: only collect effects (bodies that are not expanded)
    depth: int = 0  # program-defined function calls being expanded
    loop: _Exit | None = None  # the innermost loop being expanded
    function: _Exit | None = None  # the function being expanded


@dataclass(slots=True, eq=False)
class _Exit:
    """A loop or function body being expanded, and whether it may already have been left
    (``break``/``continue``/``return`` under an unresolved branch): everything discovered
    after that point is under ``branch``, which is never decided."""

    base: tuple[_Branch, ...]  # the branches in force where the body starts
    branch: _Branch = field(default_factory=lambda: _Branch(frozenset()))
    maybe: bool = False


class _Leave(Exception):
    """A ``break``/``continue``/``return`` that certainly runs, unwinding discovery."""

    def __init__(self, kind: type[ast.stmt], value: Binding = None) -> None:
        self.kind = kind
        self.value = value


class _Waiter:
    __slots__ = ("pending", "run")

    def __init__(self, pending: int, run: Callable[[], None]) -> None:
        self.pending = pending
        self.run = run


def _frame(kind: ControlKind, node: ast.AST, part: str = "body") -> ControlFrame:
    return ControlFrame(kind, getattr(node, "lineno", 0), getattr(node, "col_offset", 0), part)


def _assigned_names(target: ast.AST) -> Iterable[str]:
    for node in ast.walk(target):
        if isinstance(node, ast.Name):
            yield node.id


def _substitute(node: ast.AST, subst: Mapping[int, str]) -> ast.AST:
    """A copy of ``node`` with the subexpressions in ``subst`` replaced by names.

    Shares every subtree that contains no replacement (AST nodes are never mutated).
    """
    name = subst.get(id(node))
    if name is not None:
        return ast.Name(id=name, ctx=ast.Load())
    changed = False
    fields: dict[str, object] = {}
    for field_name, value in ast.iter_fields(node):
        if isinstance(value, ast.AST):
            new: object = _substitute(value, subst)
            changed |= new is not value
        elif isinstance(value, list):
            new = [_substitute(v, subst) if isinstance(v, ast.AST) else v for v in value]
            changed |= any(a is not b for a, b in zip(new, value, strict=True))
        else:
            new = value
        fields[field_name] = new
    if not changed:
        return node
    copy = type(node)(**fields)
    return ast.copy_location(copy, node)


def _listed(iterable: ast.expr) -> ast.expr:
    """``list(iterable)``: what a ``for`` iterates, as a value the evaluator may return
    (it refuses iterators such as ``enumerate(...)`` themselves, and unordered sets)."""
    call = ast.Call(ast.Name("list", ast.Load()), [iterable], [])
    return ast.copy_location(call, iterable)


def _bounded_items(value: object) -> list[object] | None:
    """The items a ``for`` over ``value`` yields, if that is exactly knowable and short."""
    t = type(value)
    if t in (list, tuple, str, bytes, dict, range):
        if len(value) > MAX_ITERATIONS:  # type: ignore[arg-type]
            return None
        return list(value)  # type: ignore[call-overload]
    return None  # sets (hash order), iterators, unknown values


def _truth(value: object) -> bool | None:
    if value is UNKNOWN:
        return None
    try:
        return truth(value)
    except NotKnown:
        return None


class Discovery:
    """Discovers occurrences in accepted statements and resolves them as results arrive.

    Not thread-safe; every method runs to completion before returning, and reports to
    ``sink`` synchronously (the sink must not call back into discovery while being called).
    """

    def __init__(self, capabilities: Mapping[str, Mapping[str, MethodSpec]], sink: DiscoverySink) -> None:
        self._capabilities = capabilities
        self._sink = sink
        module = Scope(None, {name: CapabilityRef(name) for name in capabilities})
        self._top = _Context(module, module, set(), (), (), (), emit=True)
        # Results of producers, UNKNOWN for those that failed or will never run.
        self._results: dict[OccurrenceId, object] = {}
        # Work waiting for results: each waiter is listed once per missing producer.
        self._waiting: dict[OccurrenceId, list[_Waiter]] = {}
        self._order = 0  # occurrences discovered so far
        self._fresh = 0  # origin tags handed out (see ``Origins``)
        self._expansions = 0  # loop iterations and function bodies expanded so far
        self._global_names: set[str] = set()  # names some function declares ``global``
        self._branches_of: dict[OccurrenceId, tuple[_Branch, ...]] = {}

    # -- public -------------------------------------------------------------------------

    def add_statements(self, statements: Iterable[ast.stmt]) -> None:
        """Discover the occurrences of newly accepted top-level statements, in order."""
        for stmt in statements:
            try:
                self._stmt(stmt, self._top)
            except RecursionError:
                self._give_up(stmt, self._top)

    def result_known(self, occurrence_id: OccurrenceId, value: object) -> None:
        """The result of ``occurrence_id`` (read-only: never mutated, never handed out)."""
        self._settle(occurrence_id, value)

    def result_unknown(self, occurrence_id: OccurrenceId) -> None:
        """``occurrence_id`` failed or will never run early: what reads it stays unknown."""
        self._settle(occurrence_id, UNKNOWN)

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

    # -- statements ---------------------------------------------------------------------

    def _stmt(self, node: ast.stmt, ctx: _Context) -> None:
        handler = _STATEMENTS.get(type(node), Discovery._stmt_other)
        handler(self, node, ctx)

    def _body(self, body: Sequence[ast.stmt], ctx: _Context) -> None:
        for stmt in body:
            self._stmt(stmt, ctx)
            for exit_ in (ctx.loop, ctx.function):
                if exit_ is not None and exit_.maybe and exit_.branch not in ctx.branches:
                    ctx = replace(ctx, branches=(*ctx.branches, exit_.branch))

    @staticmethod
    def _certain(ctx: _Context, exit_: _Exit) -> bool:
        """Whether code at ``ctx`` certainly runs whenever the body of ``exit_`` does."""
        return all(
            b.decision is not _Decision.UNDECIDED or b is exit_.branch
            for b in ctx.branches[len(exit_.base) :]
        )

    def _stmt_break(self, node: ast.Break | ast.Continue, ctx: _Context) -> None:
        exit_ = ctx.loop
        if exit_ is None:
            return
        if ctx.emit and self._certain(ctx, exit_):
            raise _Leave(type(node))
        exit_.maybe = True

    def _stmt_expr(self, node: ast.Expr, ctx: _Context) -> None:
        self._expr(node.value, ctx)

    def _stmt_assign(self, node: ast.Assign, ctx: _Context) -> None:
        value = self._expr(node.value, ctx, alias=True)
        for target in node.targets:
            self._assign(target, value, ctx)

    def _stmt_annassign(self, node: ast.AnnAssign, ctx: _Context) -> None:
        if node.value is None:
            self._expr(node.annotation, ctx)
            return
        value = self._expr(node.value, ctx, alias=True)
        self._expr(node.annotation, ctx)
        self._assign(node.target, value, ctx)

    def _stmt_augassign(self, node: ast.AugAssign, ctx: _Context) -> None:
        value = self._expr(node.value, ctx)
        target = node.target
        if isinstance(target, ast.Name):
            old = ctx.scope.lookup(target.id)
            if isinstance(old, Known) and is_immutable(old.value):
                expr = ast.BinOp(ast.Name(target.id, ast.Load()), node.op, ast.Name("$v", ast.Load()))
                self._bind(target.id, self._derive(expr, {target.id: old, "$v": value}), ctx)
            else:
                # ``+=`` on a list or dict mutates it in place, and aliases see the change.
                self._mutated(ctx, origins_of(old))
                self._bind(target.id, UNKNOWN, ctx)
        else:
            self._assign(target, UNKNOWN, ctx)

    def _stmt_delete(self, node: ast.Delete, ctx: _Context) -> None:
        for target in node.targets:
            self._assign(target, UNKNOWN, ctx)

    def _stmt_import(self, node: ast.Import | ast.ImportFrom, ctx: _Context) -> None:
        for alias in node.names:
            if alias.name == "*":
                for name, b in list(ctx.scope.visible()):
                    if not isinstance(b, CapabilityRef | MethodRef):
                        ctx.scope.bind(name, UNKNOWN)
                continue
            if isinstance(node, ast.Import):
                module = alias.name if alias.asname else alias.name.split(".")[0]
            else:
                module = f"{node.module or ''}.{alias.name}" if not node.level else ""
            reflective = not module or module.split(".")[0] in REFLECTIVE_MODULES
            self._bind(alias.asname or alias.name.split(".")[0], ModuleRef(module, reflective), ctx)

    def _stmt_functiondef(self, node: ast.FunctionDef | ast.AsyncFunctionDef, ctx: _Context) -> None:
        for decorator in node.decorator_list:
            self._expr(decorator, ctx)
        a = node.args
        defaults: list[object] = []
        for d in [*a.defaults, *(d for d in a.kw_defaults if d is not None)]:
            b = self._expr(d, ctx)
            defaults.append(b.value if isinstance(b, Known) else UNKNOWN)
        declared = {
            name
            for inner in ast.walk(node)
            if isinstance(inner, ast.Global | ast.Nonlocal)
            for name in inner.names
        }
        self._declare_global(declared, ctx)
        expandable = (
            isinstance(node, ast.FunctionDef)
            and not node.decorator_list
            and not declared
            and not (a.posonlyargs or a.vararg or a.kwonlyargs or a.kwarg)
            and UNKNOWN not in defaults
            and not any(isinstance(n, ast.Yield | ast.YieldFrom) for n in ast.walk(node))
        )
        if node.decorator_list:
            self._opaque(ctx)  # the decorator is called with the function
        self._bind(node.name, FunctionRef(node, tuple(defaults), expandable), ctx)

    def _stmt_classdef(self, node: ast.ClassDef, ctx: _Context) -> None:
        for expr in [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]:
            self._expr(expr, ctx)
        self._declare_global(
            {n for inner in ast.walk(node) if isinstance(inner, ast.Global) for n in inner.names}, ctx
        )
        # The class body runs now, as code this module does not follow.
        self._opaque(ctx)
        self._bind(node.name, UNKNOWN, ctx)

    def _stmt_if(self, node: ast.If, ctx: _Context) -> None:
        test = self._expr(node.test, ctx)
        producers = producers_of(test)
        decided = _truth(resolve(test, self._results)) if not producers else None
        if decided is not None:
            live = node.body if decided else node.orelse
            part = "body" if decided else "orelse"
            self._body(live, replace(ctx, control=(*ctx.control, _frame(ControlKind.IF, node, part))))
            return
        then, orelse = _Branch(producers), _Branch(producers)
        if producers and ctx.emit:
            # Decided before anything under it waits for arguments, so a dead side is
            # dropped before its arguments are tried.
            self._when_known(producers, self._decider(test, [then], [orelse]))
        for part, body, branch in (("body", node.body, then), ("orelse", node.orelse, orelse)):
            overlay = Scope(ctx.scope)
            self._body(
                body,
                replace(
                    ctx,
                    scope=overlay,
                    globals=overlay if ctx.globals is ctx.scope else ctx.globals,
                    control=(*ctx.control, _frame(ControlKind.IF, node, part)),
                    branches=(*ctx.branches, branch) if ctx.emit else ctx.branches,
                ),
            )
            self._merge(overlay, ctx)

    @staticmethod
    def _control_of(branches: Iterable[_Branch]) -> tuple[bool, bool]:
        discardable = dead = False
        for b in branches:
            discardable |= b.decision is _Decision.UNDECIDED
            dead |= b.decision is _Decision.DEAD
        return discardable, dead

    def _stmt_for(self, node: ast.For, ctx: _Context) -> None:
        iterable = self._iterable(node.iter, ctx)
        producers = producers_of(iterable)
        if ctx.emit and not producers:
            items = _bounded_items(resolve(iterable, self._results))
            if items is not None:
                overlay = Scope(ctx.scope)
                try:
                    if self._expand_for(node, items, origins_of(iterable), overlay, ctx):
                        return
                finally:
                    self._merge(overlay, ctx)
        elif ctx.emit:
            base, written = ctx.scope.snapshot(), set(ctx.written)

            def later() -> None:
                items = _bounded_items(resolve(iterable, self._results))
                if items is None:
                    return
                # What follows the loop was discovered long ago: a ``return`` here can only
                # end this expansion (the function's own exit already counts it as maybe).
                function = _Exit(ctx.branches) if ctx.function is not None else None
                deferred = replace(
                    ctx, scope=base, globals=base, written=written, loop=None, function=function
                )
                with contextlib.suppress(_Leave):
                    self._expand_for(node, items, origins_of(iterable), Scope(base), deferred)

            self._when_known(producers, later)
        self._dry_loop(node.target, node.body, node.orelse, ctx)

    def _expand_for(
        self, node: ast.For, items: list[object], origins: Origins, overlay: Scope, ctx: _Context
    ) -> bool:
        if self._expansions + len(items) > MAX_EXPANSIONS:
            return False
        self._expansions += len(items)
        exit_ = _Exit(ctx.branches)
        base = replace(
            ctx,
            scope=overlay,
            globals=overlay if ctx.globals is ctx.scope else ctx.globals,
            control=(*ctx.control, _frame(ControlKind.FOR, node)),
            loop=exit_,
        )
        for index, item in enumerate(items):
            iteration = replace(
                base,
                path=(*ctx.path, index),
                branches=(*ctx.branches, exit_.branch) if exit_.maybe else ctx.branches,
            )
            self._assign(node.target, Known(item, origins), iteration)
            try:
                self._body(node.body, iteration)
            except _Leave as leave:
                if leave.kind is ast.Break:
                    return True  # ``else`` does not run
                if leave.kind is ast.Return:
                    raise
        if node.orelse:
            self._body(
                node.orelse,
                replace(
                    base,
                    control=(*ctx.control, _frame(ControlKind.FOR, node, "orelse")),
                    branches=(*ctx.branches, exit_.branch) if exit_.maybe else ctx.branches,
                    loop=ctx.loop,
                ),
            )
        return True

    def _dry_loop(
        self, target: ast.expr | None, body: Sequence[ast.stmt], orelse: Sequence[ast.stmt], ctx: _Context
    ) -> None:
        """Collect the effects of a loop that is not expanded: once, with nothing known."""
        overlay = Scope(ctx.scope)
        dry = replace(
            ctx,
            scope=overlay,
            globals=overlay if ctx.globals is ctx.scope else ctx.globals,
            emit=False,
        )
        if target is not None:
            self._assign(target, UNKNOWN, dry)
        self._body(body, replace(dry, loop=None))  # its break/continue are its own
        self._body(orelse, dry)
        self._merge(overlay, ctx)

    def _stmt_while(self, node: ast.While, ctx: _Context) -> None:
        self._expr(node.test, ctx)  # the first test always runs
        self._dry_loop(None, [ast.Expr(node.test), *node.body], node.orelse, ctx)

    def _stmt_try(self, node: ast.Try, ctx: _Context) -> None:
        if not node.handlers:
            self._body(node.body, replace(ctx, control=(*ctx.control, _frame(ControlKind.TRY, node))))
            self._body(node.finalbody, replace(ctx, control=(*ctx.control, _frame(ControlKind.TRY, node, "finally"))))
            return
        # The body may stop anywhere and be handled: after the statement, nothing it
        # assigned is certain. ``else`` runs only after the whole body, so it sees it.
        body_scope = Scope(ctx.scope)
        in_body = replace(
            ctx, scope=body_scope, globals=body_scope if ctx.globals is ctx.scope else ctx.globals
        )
        try:
            self._body(node.body, replace(in_body, control=(*ctx.control, _frame(ControlKind.TRY, node))))
            orelse = replace(in_body, control=(*ctx.control, _frame(ControlKind.TRY, node, "orelse")))
            self._body(node.orelse, orelse)
            for handler in node.handlers:
                self._handler(handler, body_scope, ctx)
        finally:
            self._merge(body_scope, ctx)
        self._body(node.finalbody, replace(ctx, control=(*ctx.control, _frame(ControlKind.TRY, node, "finally"))))

    def _handler(self, handler: ast.ExceptHandler, body_scope: Scope, ctx: _Context) -> None:
        """An ``except`` clause: runs only if something failed, so it is never certain."""
        overlay = Scope(ctx.scope)
        for name in body_scope.assigned:
            overlay.bind(name, UNKNOWN)
        if handler.name:
            overlay.bind(handler.name, UNKNOWN)
        in_handler = replace(
            ctx,
            scope=overlay,
            globals=overlay if ctx.globals is ctx.scope else ctx.globals,
            control=(*ctx.control, _frame(ControlKind.TRY, handler, "handler")),
            branches=(*ctx.branches, _Branch(frozenset())) if ctx.emit else ctx.branches,
        )
        try:
            if handler.type is not None:
                self._expr(handler.type, in_handler)
            self._body(handler.body, in_handler)
        finally:
            self._merge(overlay, ctx)

    def _stmt_with(self, node: ast.With, ctx: _Context) -> None:
        for item in node.items:
            self._expr(item.context_expr, ctx)
            if item.optional_vars is not None:
                self._assign(item.optional_vars, UNKNOWN, ctx)
        # A context manager may suppress an exception: nothing assigned inside is certain after.
        overlay = Scope(ctx.scope)
        inside = replace(
            ctx,
            scope=overlay,
            globals=overlay if ctx.globals is ctx.scope else ctx.globals,
            control=(*ctx.control, _frame(ControlKind.WITH, node)),
        )
        try:
            self._body(node.body, inside)
        finally:
            self._merge(overlay, ctx)

    def _stmt_return(self, node: ast.Return, ctx: _Context) -> None:
        value = self._expr(node.value, ctx, alias=True) if node.value is not None else Known(None)
        exit_ = ctx.function
        if exit_ is None:
            return
        if ctx.emit and self._certain(ctx, exit_):
            raise _Leave(ast.Return, value)
        exit_.maybe = True

    def _stmt_nothing(self, node: ast.stmt, ctx: _Context) -> None:
        pass

    def _stmt_plain(self, node: ast.stmt, ctx: _Context) -> None:
        """``raise``/``assert``: only the expressions they evaluate matter."""
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self._expr(child, ctx)

    def _stmt_other(self, node: ast.stmt, ctx: _Context) -> None:
        """Anything else (``match``, ``async for``/``with``, ...): nothing is followed or
        expanded; its effects are collected and every name it binds becomes ``UNKNOWN``."""
        overlay = Scope(ctx.scope)
        dry = replace(
            ctx, scope=overlay, globals=overlay if ctx.globals is ctx.scope else ctx.globals, emit=False
        )
        self._dry_children(node, dry)
        for stored in ast.walk(node):
            if isinstance(stored, ast.Name) and isinstance(stored.ctx, ast.Store | ast.Del):
                overlay.bind(stored.id, UNKNOWN)
            elif isinstance(stored, ast.MatchAs | ast.MatchStar) and stored.name:
                overlay.bind(stored.name, UNKNOWN)
            elif isinstance(stored, ast.MatchMapping) and stored.rest:
                overlay.bind(stored.rest, UNKNOWN)
        self._merge(overlay, ctx)

    def _dry_children(self, node: ast.AST, dry: _Context) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                self._stmt(child, dry)
            elif isinstance(child, ast.expr):
                if isinstance(getattr(child, "ctx", None), ast.Store | ast.Del):
                    self._assign(child, UNKNOWN, dry)
                else:
                    self._expr(child, dry)
            else:
                self._dry_children(child, dry)

    # -- bindings and effects -----------------------------------------------------------

    def _bind(self, name: str, binding: Binding, ctx: _Context) -> None:
        ctx.scope.bind(name, binding)

    def _assign(self, target: ast.expr, value: Binding, ctx: _Context) -> None:
        if isinstance(target, ast.Name):
            self._bind(target.id, value, ctx)
        elif isinstance(target, ast.Tuple | ast.List):
            elts = target.elts
            if any(isinstance(e, ast.Starred) for e in elts):
                for e in elts:
                    self._assign(e, UNKNOWN, ctx)
                return
            for index, elt in enumerate(elts):
                self._assign(elt, self._unpack(value, index, len(elts)), ctx)
        elif isinstance(target, ast.Starred):
            self._assign(target.value, UNKNOWN, ctx)
        elif isinstance(target, ast.Attribute | ast.Subscript):
            # Item or attribute assignment (or deletion) mutates the object in place.
            receiver = self._expr(target.value, ctx)  # a capability here escapes: untrusted
            if isinstance(target, ast.Subscript):
                self._expr(target.slice, ctx)
            self._mutated(ctx, origins_of(receiver))

    def _unpack(self, value: Binding, index: int, count: int) -> Binding:
        if isinstance(value, Known):
            if type(value.value) in (tuple, list, str, bytes, dict):
                items = list(value.value)  # type: ignore[call-overload]
                if len(items) == count:
                    return Known(items[index], origins_of(value))
            return UNKNOWN
        if isinstance(value, Result | Derived | Unpacked):
            return Unpacked(value, index, count)
        return UNKNOWN

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
        return UNKNOWN if value is UNKNOWN else Known(value, origins)

    @staticmethod
    def _scopes(ctx: _Context) -> tuple[Scope, ...]:
        return (ctx.scope,) if ctx.globals is ctx.scope else (ctx.scope, ctx.globals)

    def _mutated(self, ctx: _Context, origins: Origins = None) -> None:
        """Something with ``origins`` may have changed in place: no value that may share
        structure with it is known any more (with ``None``: no possibly-mutable value)."""
        for scope in self._scopes(ctx):
            for name, b in list(scope.visible()):
                if may_be_mutable(b):
                    theirs = origins_of(b)
                    if origins is None or theirs is None or origins & theirs:
                        scope.bind(name, UNKNOWN)

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
        it bound is ``UNKNOWN``; a capability it aliased is no longer trusted."""
        for name in overlay.assigned - exclude:
            b = overlay.local.get(name)
            if isinstance(b, CapabilityRef | MethodRef):
                self._distrust(b.capability, ctx)
            ctx.scope.bind(name, UNKNOWN)

    # -- expressions --------------------------------------------------------------------

    def _expr(self, node: ast.expr, ctx: _Context, *, alias: bool = False) -> Binding:
        """Discover the occurrences in ``node``, apply its effects, return its binding.

        ``alias``: the expression is a whole right-hand side, so a bare capability (or
        method, or function) is an alias rather than an escape.
        """
        if alias:
            if isinstance(node, ast.Name):
                b = ctx.scope.lookup(node.id)
                if b is not None:
                    return b
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                receiver = ctx.scope.lookup(node.value.id)
                if isinstance(receiver, CapabilityRef):
                    return MethodRef(receiver.capability, node.attr)
            elif isinstance(node, ast.Lambda):
                self._scan_all([*node.args.defaults, *node.args.kw_defaults], ctx, {})
                return FunctionRef(node, (), False)
        subst: dict[int, tuple[str, Binding]] = {}
        self._scan(node, ctx, subst)
        return self._value(node, ctx, subst)

    def _iterable(self, node: ast.expr, ctx: _Context) -> Binding:
        """Discover the occurrences in ``node``; the binding of the items it iterates."""
        subst: dict[int, tuple[str, Binding]] = {}
        self._scan(node, ctx, subst)
        return self._value(_listed(node), ctx, subst)

    def _value(self, node: ast.expr, ctx: _Context, subst: dict[int, tuple[str, Binding]]) -> Binding:
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
        for name in free_names(node):
            b = synthetic.get(name) if name in synthetic else ctx.scope.lookup(name)
            if b is not None:
                captured[name] = b
        return self._derive(node, captured)

    def _scan_all(self, nodes: Iterable[ast.expr | None], ctx: _Context, subst: dict[int, tuple[str, Binding]]) -> None:
        for n in nodes:
            if n is not None:
                self._scan(n, ctx, subst)

    def _scan(self, node: ast.AST, ctx: _Context, subst: dict[int, tuple[str, Binding]]) -> None:
        """Walk ``node`` in evaluation order: occurrences, escapes, mutations, opaque code."""
        if isinstance(node, ast.Call):
            self._scan_call(node, ctx, subst)
        elif isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                self._escape(ctx.scope.lookup(node.id), ctx)
        elif isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and isinstance(
                ctx.scope.lookup(node.value.id), CapabilityRef
            ):
                return  # reading an attribute of a capability does not hand it out
            self._scan(node.value, ctx, subst)
        elif isinstance(node, ast.Lambda):
            self._scan_all([*node.args.defaults, *node.args.kw_defaults], ctx, subst)
            self._opaque(ctx)  # whatever receives it may run it
        elif isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
            self._comprehension(node, ctx, subst)
        elif isinstance(node, ast.BoolOp):
            self._scan(node.values[0], ctx, subst)
            self._conditional(node.values[1:], node, ctx, subst)
        elif isinstance(node, ast.IfExp):
            self._scan(node.test, ctx, subst)
            self._conditional([node.body, node.orelse], node, ctx, subst)
        elif isinstance(node, ast.NamedExpr):
            self._scan(node.value, ctx, subst)
            # It may sit in a part that does not run; exactness over coverage.
            self._bind(node.target.id, UNKNOWN, ctx)
        else:
            for child in ast.iter_child_nodes(node):
                self._scan(child, ctx, subst)

    def _escape(self, b: Binding | None, ctx: _Context) -> None:
        if isinstance(b, CapabilityRef | MethodRef):
            self._distrust(b.capability, ctx)
        elif isinstance(b, FunctionRef):
            self._opaque(ctx)

    @staticmethod
    def _root(node: ast.expr, ctx: _Context) -> Binding | None:
        """The binding of the name a chain like ``a.b[0].c()`` starts from."""
        while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
            node = node.func if isinstance(node, ast.Call) else node.value
        return ctx.scope.lookup(node.id) if isinstance(node, ast.Name) else None

    def _conditional(self, parts: Sequence[ast.expr], node: ast.expr, ctx: _Context, subst: dict[int, tuple[str, Binding]]) -> None:
        """Operands that short-circuiting may skip: their occurrences are discardable."""
        inner = replace(
            ctx,
            control=(*ctx.control, _frame(ControlKind.CONDITIONAL, node)),
            branches=(*ctx.branches, _Branch(frozenset())) if ctx.emit else ctx.branches,
        )
        for part in parts:
            self._scan(part, inner, subst)

    def _scan_call(self, node: ast.Call, ctx: _Context, subst: dict[int, tuple[str, Binding]]) -> None:
        func = node.func
        arguments = [*node.args, *(k.value for k in node.keywords)]
        target: Binding | None = None
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            receiver = ctx.scope.lookup(func.value.id)
            if isinstance(receiver, CapabilityRef):
                target = MethodRef(receiver.capability, func.attr)
        elif isinstance(func, ast.Name):
            target = ctx.scope.lookup(func.id)
            if target is None:
                self._scan_all(arguments, ctx, subst)
                if func.id in OPAQUE_BUILTINS:
                    self._opaque(ctx)
                return
        if isinstance(target, MethodRef):
            self._scan_all(arguments, ctx, subst)
            b = self._occurrence(node, target.capability, target.method, ctx, subst)
            subst[id(node)] = (f"${len(subst)}", b)
            return
        if isinstance(target, FunctionRef):
            self._scan_all(arguments, ctx, subst)
            b = self._call_function(target, node, ctx, subst)
            subst[id(node)] = (f"${len(subst)}", b)
            return
        module = target if isinstance(target, ModuleRef) else self._root(func, ctx)
        if isinstance(module, ModuleRef):
            if isinstance(func, ast.Attribute):
                self._scan(func.value, ctx, subst)
            self._scan_all(arguments, ctx, subst)
            if module.reflective:
                self._opaque(ctx)
                return
            # Library code: it may mutate what it is handed, nothing else.
            handed = [
                b
                for arg in arguments
                for n in free_names(arg)
                if may_be_mutable(b := ctx.scope.lookup(n))
            ]
            if handed:
                self._mutated(ctx, union_origins(map(origins_of, handed)))
            return
        if isinstance(func, ast.Attribute):
            self._scan(func.value, ctx, subst)
            self._scan_all(arguments, ctx, subst)
            if func.attr not in NON_MUTATING_METHODS:
                receiver = self._value(func.value, ctx, subst)
                if may_be_mutable(receiver) or receiver is UNKNOWN:
                    self._mutated(ctx, origins_of(receiver))
            return
        # Calling a value that is not a known function: unknown code.
        self._scan(func, ctx, subst)
        self._scan_all(arguments, ctx, subst)
        self._opaque(ctx)

    def _occurrence(
        self, call: ast.Call, capability: str, method: str, ctx: _Context, subst: dict[int, tuple[str, Binding]]
    ) -> Binding:
        spec = self._capabilities.get(capability, {}).get(method)
        effect = spec.effect if spec is not None else Effect.UNKNOWN
        pre_write = capability not in ctx.written
        if effect.may_write:
            ctx.written.add(capability)
        if not ctx.emit:
            return UNKNOWN
        if ctx.path:
            if self._expansions >= MAX_EXPANSIONS:
                return UNKNOWN
            self._expansions += 1
        site = Site(
            capability,
            method,
            call.lineno,
            call.col_offset,
            call.end_lineno if call.end_lineno is not None else call.lineno,
            call.end_col_offset if call.end_col_offset is not None else call.col_offset,
            ctx.control,
        )
        oid = OccurrenceId(site, ctx.path)
        args_call: ast.AST = call
        synthetic: dict[str, Binding] = {}
        if subst:
            args_call = _substitute(call, {k: name for k, (name, _) in subst.items()})
            synthetic = dict(subst.values())
        assert isinstance(args_call, ast.Call)
        captured: dict[str, Binding] = {}
        data: frozenset[OccurrenceId] = frozenset()
        for name in free_names(args_call):
            b = synthetic.get(name) if name in synthetic else ctx.scope.lookup(name)
            if b is None or isinstance(b, CapabilityRef | MethodRef | FunctionRef):
                continue
            captured[name] = b
            p = producers_of(b)
            if p:
                data = data | p
        control: frozenset[OccurrenceId] = frozenset()
        for branch in ctx.branches:
            if branch.producers:  # decided or not: the graph's shape must not depend on timing
                control = control | branch.producers
        discardable, dead = self._control_of(ctx.branches)
        occurrence = Occurrence(oid, effect, pre_write, data, control, discardable, dead, self._order)
        self._order += 1
        if ctx.branches:
            self._branches_of[oid] = ctx.branches
            for branch in ctx.branches:
                branch.members.append(oid)
        self._sink.discovered(occurrence)
        final_call = args_call
        self._when_known(data, lambda: self._arguments(oid, final_call, captured))
        return Result(oid) if effect.speculable and pre_write else UNKNOWN

    def _arguments(self, oid: OccurrenceId, call: ast.Call, captured: dict[str, Binding]) -> None:
        try:
            args, kwargs = evaluate_call_arguments(call, evaluator_env(captured, self._results))
        except (NotKnown, RecursionError):
            self._sink.arguments_unknown(oid)
            return
        self._sink.arguments_known(oid, args, kwargs)

    # -- functions ----------------------------------------------------------------------

    def _call_function(
        self, ref: FunctionRef, call: ast.Call, ctx: _Context, subst: dict[int, tuple[str, Binding]]
    ) -> Binding:
        bound = self._bind_parameters(ref, call, ctx, subst)
        if (
            bound is None
            or not ctx.emit
            or ctx.depth >= MAX_CALL_DEPTH
            or self._expansions >= MAX_EXPANSIONS
        ):
            self._opaque(ctx)
            return UNKNOWN
        self._expansions += 1
        fn = ref.node
        assert isinstance(fn, ast.FunctionDef)
        local = Scope(ctx.globals)
        for name, b in bound.items():
            local.bind(name, b)
        exit_ = _Exit(ctx.branches)
        inner = _Context(
            scope=local,
            globals=ctx.globals,
            written=ctx.written,
            path=(*ctx.path, (call.lineno, call.col_offset)),
            control=(_frame(ControlKind.FUNCTION, fn),),
            branches=ctx.branches,
            emit=True,
            depth=ctx.depth + 1,
            loop=None,
            function=exit_,
        )
        value: Binding = Known(None)
        try:
            self._body(fn.body, inner)
        except _Leave as leave:
            value = leave.value
        return UNKNOWN if exit_.maybe else value

    def _bind_parameters(
        self, ref: FunctionRef, call: ast.Call, ctx: _Context, subst: dict[int, tuple[str, Binding]]
    ) -> dict[str, Binding] | None:
        """Known arguments bound to ``ref``'s parameters, or None when not expandable."""
        if not ref.expandable:
            return None
        params = [a.arg for a in ref.node.args.args]
        if len(call.args) > len(params):
            return None
        bound: dict[str, Binding] = {}
        pairs = [*zip(params, call.args, strict=False), *((k.arg, k.value) for k in call.keywords)]
        for name, expr in pairs:
            if name is None or name not in params or name in bound or isinstance(expr, ast.Starred):
                return None
            b = self._value(expr, ctx, subst)
            if not isinstance(b, Known):
                return None
            bound[name] = b
        for name, default in zip(params[len(params) - len(ref.defaults) :], ref.defaults, strict=True):
            bound.setdefault(name, Known(default))
        return bound if len(bound) == len(params) else None

    # -- comprehensions -----------------------------------------------------------------

    def _comprehension(
        self,
        node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp,
        ctx: _Context,
        subst: dict[int, tuple[str, Binding]],
    ) -> None:
        first = node.generators[0]
        self._scan(first.iter, ctx, subst)
        targets = frozenset(n for g in node.generators for n in _assigned_names(g.target))
        if not self._calls_out(node, ctx, targets):
            self._dry_comprehension(node, ctx, targets)
            return  # the evaluator computes its value, if it can
        iterable = self._value(_listed(first.iter), ctx, subst)
        subst[id(node)] = (f"${len(subst)}", UNKNOWN)
        producers = producers_of(iterable)
        if ctx.emit and not producers:
            items = _bounded_items(resolve(iterable, self._results))
            if items is not None:
                overlay = Scope(ctx.scope)
                if self._expand_comprehension(node, 0, items, origins_of(iterable), overlay, ctx):
                    self._merge(overlay, ctx, targets)
                    return
        elif ctx.emit:
            base, written = ctx.scope.snapshot(), set(ctx.written)

            def later() -> None:
                items = _bounded_items(resolve(iterable, self._results))
                if items is not None:
                    deferred = replace(ctx, scope=base, globals=base, written=written)
                    self._expand_comprehension(node, 0, items, origins_of(iterable), Scope(base), deferred)

            self._when_known(producers, later)
        self._dry_comprehension(node, ctx, targets)

    def _calls_out(self, node: ast.AST, ctx: _Context, shadowed: frozenset[str]) -> bool:
        """Whether ``node`` calls a capability method or a program-defined function."""
        for inner in ast.walk(node):
            if not isinstance(inner, ast.Call):
                continue
            func = inner.func
            if isinstance(func, ast.Attribute):
                func = func.value
            if isinstance(func, ast.Name) and func.id not in shadowed:
                b = ctx.scope.lookup(func.id)
                if isinstance(b, CapabilityRef | MethodRef | FunctionRef):
                    return True
        return False

    def _dry_comprehension(self, node: ast.expr, ctx: _Context, targets: frozenset[str]) -> None:
        assert isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp)
        overlay = Scope(ctx.scope)
        dry = replace(
            ctx, scope=overlay, globals=overlay if ctx.globals is ctx.scope else ctx.globals, emit=False
        )
        for name in targets:
            overlay.bind(name, UNKNOWN)
        subst: dict[int, tuple[str, Binding]] = {}
        for index, g in enumerate(node.generators):
            if index:
                self._scan(g.iter, dry, subst)
            self._scan_all(g.ifs, dry, subst)
        parts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
        self._scan_all(parts, dry, subst)
        self._merge(overlay, ctx, targets)

    def _expand_comprehension(
        self,
        node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp,
        level: int,
        items: list[object],
        origins: Origins,
        overlay: Scope,
        ctx: _Context,
    ) -> bool:
        if self._expansions + len(items) > MAX_EXPANSIONS:
            return False
        self._expansions += len(items)
        generator = node.generators[level]
        base = replace(ctx, scope=overlay)
        if level == 0:
            base.control = (*ctx.control, _frame(ControlKind.COMPREHENSION, node, "element"))
        for index, item in enumerate(items):
            element = replace(base, path=(*ctx.path, index))
            self._assign(generator.target, Known(item, origins), element)
            for condition in generator.ifs:
                test = self._expr(condition, element)
                producers = producers_of(test)
                decided = None if producers else _truth(resolve(test, self._results))
                if decided is False:
                    break
                if decided is None:
                    branch = _Branch(producers)
                    element = replace(element, branches=(*element.branches, branch))
                    if producers:
                        self._when_known(producers, self._decider(test, [branch], []))
            else:
                if level + 1 < len(node.generators):
                    inner = self._iterable(node.generators[level + 1].iter, element)
                    inner_items = None if producers_of(inner) else _bounded_items(resolve(inner, self._results))
                    if inner_items is not None:
                        self._expand_comprehension(node, level + 1, inner_items, origins_of(inner), overlay, element)
                elif isinstance(node, ast.DictComp):
                    self._expr(node.key, element)
                    self._expr(node.value, element)
                else:
                    self._expr(node.elt, element)
        return True

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


_STATEMENTS: dict[type[ast.stmt], Callable[[Discovery, Any, _Context], None]] = {
    ast.Expr: Discovery._stmt_expr,
    ast.Assign: Discovery._stmt_assign,
    ast.AnnAssign: Discovery._stmt_annassign,
    ast.AugAssign: Discovery._stmt_augassign,
    ast.Delete: Discovery._stmt_delete,
    ast.Import: Discovery._stmt_import,
    ast.ImportFrom: Discovery._stmt_import,
    ast.FunctionDef: Discovery._stmt_functiondef,
    ast.AsyncFunctionDef: Discovery._stmt_functiondef,
    ast.ClassDef: Discovery._stmt_classdef,
    ast.If: Discovery._stmt_if,
    ast.For: Discovery._stmt_for,
    ast.While: Discovery._stmt_while,
    ast.Try: Discovery._stmt_try,
    ast.With: Discovery._stmt_with,
    ast.Return: Discovery._stmt_return,
    ast.Raise: Discovery._stmt_plain,
    ast.Assert: Discovery._stmt_plain,
    ast.Pass: Discovery._stmt_nothing,
    ast.Break: Discovery._stmt_break,
    ast.Continue: Discovery._stmt_break,
    ast.Global: Discovery._stmt_nothing,
    ast.Nonlocal: Discovery._stmt_nothing,
}
"""Statement handlers by node type; anything else goes to ``_stmt_other`` (effects only)."""
