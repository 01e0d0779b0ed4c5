"""Compound statements: ``if``, ``for``, ``while``, ``try`` and ``with``, followed exactly
where their control is known and for their effects where it is not.

A known ``if`` condition follows the live branch; one that reads results is decided when
they arrive, both sides discardable until then. A ``for`` over a known, bounded iterable
expands one iteration at a time (path = iteration index); over a call result, once it
arrives; every loop is also walked for its effects (``_dry_loop``). ``except`` clauses,
``with`` bodies and ``try`` bodies leave what they assigned uncertain. See ``_discovery``
for the rules as a whole.
"""

from __future__ import annotations

import ast
import contextlib
from collections.abc import Sequence
from dataclasses import replace

from ..evaluator import UNKNOWN
from ._bindings import (
    Known,
    Mutated,
    Origins,
    Scope,
    origins_of,
    producers_of,
    resolve,
)
from ._comprehensions import _Comprehensions
from ._control import (
    _bounded_items,
    _Branch,
    _Context,
    _Exit,
    _frame,
    _Leave,
    _truth,
)
from ._functions import _Functions
from ._model import ControlKind


class _ControlFlow(_Functions, _Comprehensions):
    """Compound statements; ``Discovery`` adds the simple ones and the dispatch."""

    def _stmt_if(self, node: ast.If, ctx: _Context) -> None:
        test = self._expr(node.test, ctx)
        producers = producers_of(test)
        decided = _truth(resolve(test, self._results)) if not producers else None
        if decided is not None:
            live = node.body if decided else node.orelse
            part = "body" if decided else "orelse"
            self._body(
                live, replace(ctx, control=(*ctx.control, _frame(ControlKind.IF, node, part)))
            )
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
            base, written = ctx.scope.snapshot(node), ctx.written.copy()

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
        self._dry_loop(node.target, node.body, node.orelse, ctx, origins_of(iterable))

    def _expand_for(
        self, node: ast.For, items: list[object], origins: Origins, overlay: Scope, ctx: _Context
    ) -> bool:
        if not self._may_expand(len(items)):
            return False
        with self._expanding():
            return self._iterate(node, items, origins, overlay, ctx)

    def _iterate(
        self, node: ast.For, items: list[object], origins: Origins, overlay: Scope, ctx: _Context
    ) -> bool:
        exit_, base = _loop_context(node, overlay, ctx)
        for index, item in enumerate(items):
            if not self._may_expand(0):
                # Out of time: the rest is not expanded (nor is ``else``), so what it may
                # do is not known either.
                self._opaque(ctx)
                return True
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
            if exit_.maybe:
                # A ``continue`` under an unresolved branch may have skipped the rest of
                # this iteration: the next one may start from any point of it.
                self._merge(overlay, base)
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
        self,
        target: ast.expr | None,
        body: Sequence[ast.stmt],
        orelse: Sequence[ast.stmt],
        ctx: _Context,
        items: Origins = None,
    ) -> None:
        """Collect the effects of a loop that is not expanded, as many runs of its body
        (its items, unknown, share structure with ``items`` only)."""
        overlay = Scope(ctx.scope)
        dry = replace(
            ctx,
            scope=overlay,
            globals=overlay if ctx.globals is ctx.scope else ctx.globals,
            emit=False,
        )

        def once() -> None:
            if target is not None:
                self._assign(target, UNKNOWN if items is None else Mutated(items), dry)
            self._body(body, replace(dry, loop=None))  # its break/continue are its own
            self._body(orelse, dry)

        self._repeatedly(
            once, overlay, dry, [*([target] if target is not None else []), *body, *orelse]
        )
        self._merge(overlay, ctx)

    def _stmt_while(self, node: ast.While, ctx: _Context) -> None:
        self._expr(node.test, ctx)  # the first test always runs
        self._dry_loop(None, [ast.Expr(node.test), *node.body], node.orelse, ctx)

    def _stmt_try(self, node: ast.Try, ctx: _Context) -> None:
        if not node.handlers:
            self._body(
                node.body, replace(ctx, control=(*ctx.control, _frame(ControlKind.TRY, node)))
            )
            self._body(
                node.finalbody,
                replace(ctx, control=(*ctx.control, _frame(ControlKind.TRY, node, "finally"))),
            )
            return
        # The body may stop anywhere and be handled: after the statement, nothing it
        # assigned is certain. ``else`` runs only after the whole body, so it sees it.
        body_scope = Scope(ctx.scope)
        in_body = replace(
            ctx, scope=body_scope, globals=body_scope if ctx.globals is ctx.scope else ctx.globals
        )
        try:
            self._body(
                node.body, replace(in_body, control=(*ctx.control, _frame(ControlKind.TRY, node)))
            )
            orelse = replace(
                in_body, control=(*ctx.control, _frame(ControlKind.TRY, node, "orelse"))
            )
            self._body(node.orelse, orelse)
            for handler in node.handlers:
                self._handler(handler, body_scope, ctx)
        finally:
            self._merge(body_scope, ctx)
        self._body(
            node.finalbody,
            replace(ctx, control=(*ctx.control, _frame(ControlKind.TRY, node, "finally"))),
        )

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


def _loop_context(node: ast.For, overlay: Scope, ctx: _Context) -> tuple[_Exit, _Context]:
    """The context an expanded ``for``'s body runs in (its names in ``overlay``, the loop's
    frame on the control stack) and the exit its ``break``/``continue`` record."""
    exit_ = _Exit(ctx.branches)
    base = replace(
        ctx,
        scope=overlay,
        globals=overlay if ctx.globals is ctx.scope else ctx.globals,
        control=(*ctx.control, _frame(ControlKind.FOR, node)),
        loop=exit_,
    )
    return exit_, base
