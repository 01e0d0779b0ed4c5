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
wasted early read - the claim is the gate (docs/contract.md) - but a guess we know to be shaky
is not made.

The rules, each with a test in ``tests/occurrences/test_discovery.py``:

- Statements run in order; a call site's arguments are evaluated by the exact evaluator
  over the names bound so far; ``x = cap.m(...)`` binds ``x`` to that occurrence's result.
- Any statement that might mutate a value in place (a method call that is not known to be
  non-mutating, an item or attribute assignment, ``+=`` on a possible container, a library
  call handed a container, a call to program-defined or unknown code) makes every binding
  that may share structure with the mutated value unknown (all possibly-mutable ones when
  its origin is unknown). Where code is followed exactly such a binding keeps its origins
  (``Mutated``), grown by what the mutation took in, so that mutating it again forgets
  only what may share structure with it (tests in ``test_discovery_precision.py``).
- ``for`` over a known, bounded iterable expands one occurrence per iteration (path =
  iteration index); over a call result, the expansion waits for the result. ``while`` is
  never expanded. A loop not expanded is followed for its effects, pass after pass, until
  what its runs assign and let share structure settles. After any loop, names assigned
  in its body are unknown.
- ``if`` with a known condition follows the live branch only; otherwise both branches'
  occurrences are discardable (resolved later if the condition reads results), and names
  assigned in either are ``UNKNOWN`` after it. ``break``/``continue``/``return`` are
  followed exactly where they certainly run; under an unresolved branch (or in code not
  followed) they make everything after them in the loop or function discardable.
  The operands ``and``/``or``/``x if c else y`` may skip are decided the same way as an
  ``if``; ``except`` clauses are discardable, and what a ``try`` body assigned is
  ``UNKNOWN`` after it.
- A function is expanded only when called with known arguments (bounded depth); its calls
  then get the calling position in their path. Called from module level with arguments
  not all known, its body is walked once for its effects only (its own calls of program
  functions are unknown code); otherwise the call is unknown code. A value returned where
  the caller cannot see it exactly escapes (a capability is no longer trusted).
- Calls that may write (``write``/``unknown`` effects, program-defined or unknown code)
  put the capability (all capabilities, for unknown code) on a new view: later reads are
  not pre-write. A ``live_read`` does not. Library imports are not unknown code; the
  reflective modules (``REFLECTIVE_MODULES``) are.
- Scopes (``_scopes``, tests in ``tests/occurrences/test_discovery_scopes.py``): a
  ``write`` whose declared scope argument is known exactly when it is discovered moves
  only that scope to a new view; a later read stays pre-write unless its own scope may
  overlap it (no scope, or one not computable: it may). A read whose scope reads results
  is decided when they arrive; if it overlaps, its arguments are reported unknown. In a
  body followed only for its effects (a loop not expanded) every write touches everything.
- Determinism: the graph's final shape never depends on when results arrive (a condition
  or loop that reads a result is always handled as pending, then resolved), nor on how the
  statements were chunked.
- Bounds: ``MAX_ITERATIONS`` per loop, ``MAX_CALL_DEPTH``, ``MAX_EXPANSIONS`` per run; a
  statement nested too deeply to walk recursively is assumed to do the worst.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any

from ..evaluator import UNKNOWN, bound_names, walk
from ._bindings import (
    CapabilityRef,
    FunctionRef,
    Known,
    MethodRef,
    ModuleRef,
    Mutated,
    Scope,
    is_immutable,
    may_be_mutable,
    origins_of,
    union_origins,
)
from ._control import (
    REFLECTIVE_MODULES,
    _Context,
    _Decision,
    _Exit,
    _Leave,
)
from ._flow import _ControlFlow
from ._model import OccurrenceId


class Discovery(_ControlFlow):
    """Discovers occurrences in accepted statements and resolves them as results arrive.

    Not thread-safe; every method runs to completion before returning, and reports to
    ``sink`` synchronously (the sink must not call back into discovery while being called).
    """

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
                expr = ast.BinOp(
                    ast.Name(target.id, ast.Load()), node.op, ast.Name("$v", ast.Load())
                )
                self._bind(target.id, self._derive(expr, {target.id: old, "$v": value}), ctx)
            else:
                # ``+=`` on a list or dict mutates it in place, and aliases see the change;
                # the name then holds that value, or a new one, made of both.
                self._mutated(ctx, origins_of(old), origins_of(value))
                grown = union_origins((origins_of(old), origins_of(value)))
                self._bind(
                    target.id,
                    Mutated(grown) if may_be_mutable(old) and grown is not None else UNKNOWN,
                    ctx,
                )
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

    def _stmt_functiondef(
        self, node: ast.FunctionDef | ast.AsyncFunctionDef, ctx: _Context
    ) -> None:
        for decorator in node.decorator_list:
            self._expr(decorator, ctx)
        a = node.args
        defaults: list[object] = []
        for d in [*a.defaults, *(d for d in a.kw_defaults if d is not None)]:
            b = self._expr(d, ctx)
            defaults.append(b.value if isinstance(b, Known) else UNKNOWN)
        declared = {
            name
            for inner in walk(node)
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
            and not any(isinstance(n, ast.Yield | ast.YieldFrom) for n in walk(node))
        )
        if node.decorator_list:
            self._opaque(ctx)  # the decorator is called with the function
        self._bind(node.name, FunctionRef(node, tuple(defaults), expandable), ctx)

    def _stmt_classdef(self, node: ast.ClassDef, ctx: _Context) -> None:
        for expr in [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]:
            self._expr(expr, ctx)
        self._declare_global(
            {n for inner in walk(node) if isinstance(inner, ast.Global) for n in inner.names}, ctx
        )
        # The class body runs now, as code this module does not follow.
        self._opaque(ctx)
        self._bind(node.name, UNKNOWN, ctx)

    def _stmt_return(self, node: ast.Return, ctx: _Context) -> None:
        value = self._expr(node.value, ctx, alias=True) if node.value is not None else Known(None)
        exit_ = ctx.function
        if exit_ is not None and ctx.emit and self._certain(ctx, exit_):
            raise _Leave(ast.Return, value)
        # The caller gets an unknown value (in code not followed exactly): whatever it
        # is escapes there, as a capability, function or reflective module handed out.
        self._escape(value, ctx)
        if isinstance(value, ModuleRef) and value.reflective:
            self._opaque(ctx)
        if exit_ is not None:
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
            ctx,
            scope=overlay,
            globals=overlay if ctx.globals is ctx.scope else ctx.globals,
            emit=False,
        )
        self._repeatedly(lambda: self._dry_children(node, dry), overlay, dry, [node])
        for name in bound_names([node]):
            overlay.bind(name, UNKNOWN)
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
