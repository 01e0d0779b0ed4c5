"""Comprehensions that call out: expanded one element at a time, or walked for effects.

A comprehension that calls no capability method or program function is left to the
evaluator. One that does is expanded over a known, bounded iterable (one path entry per
element, its ``if`` clauses decided like an ``if`` statement), or, when the iterable reads
results, once they arrive; its effects are always collected as from a loop not expanded.
"""

from __future__ import annotations

import ast
from dataclasses import replace

from ..evaluator import UNKNOWN, walk
from ._bindings import (
    Binding,
    CapabilityRef,
    FunctionRef,
    Known,
    MethodRef,
    Origins,
    Scope,
    origins_of,
    producers_of,
    resolve,
)
from ._control import (
    _assigned_names,
    _bounded_items,
    _Branch,
    _Context,
    _frame,
    _listed,
    _truth,
)
from ._expressions import _Expressions
from ._model import ControlKind


class _Comprehensions(_Expressions):
    """Comprehensions inside expressions (``_comprehension``)."""

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
            base, written = ctx.scope.snapshot(node), ctx.written.copy()

            def later() -> None:
                items = _bounded_items(resolve(iterable, self._results))
                if items is not None:
                    deferred = replace(ctx, scope=base, globals=base, written=written)
                    self._expand_comprehension(
                        node, 0, items, origins_of(iterable), Scope(base), deferred
                    )

            self._when_known(producers, later)
        self._dry_comprehension(node, ctx, targets)

    def _calls_out(self, node: ast.AST, ctx: _Context, shadowed: frozenset[str]) -> bool:
        """Whether ``node`` calls a capability method or a program-defined function."""
        for inner in walk(node):
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
            ctx,
            scope=overlay,
            globals=overlay if ctx.globals is ctx.scope else ctx.globals,
            emit=False,
        )
        parts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]

        def once() -> None:
            for name in targets:
                overlay.bind(name, UNKNOWN)
            subst: dict[int, tuple[str, Binding]] = {}
            for index, g in enumerate(node.generators):
                if index:
                    self._scan(g.iter, dry, subst)
                self._scan_all(g.ifs, dry, subst)
            self._scan_all(parts, dry, subst)

        self._repeatedly(once, overlay, dry, [node])
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
        if not self._may_expand(len(items)):
            return False
        with self._expanding():
            self._elements(node, level, items, origins, overlay, ctx)
        return True

    def _elements(
        self,
        node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp,
        level: int,
        items: list[object],
        origins: Origins,
        overlay: Scope,
        ctx: _Context,
    ) -> None:
        generator = node.generators[level]
        base = replace(ctx, scope=overlay)
        if level == 0:
            base.control = (*ctx.control, _frame(ControlKind.COMPREHENSION, node, "element"))
        for index, item in enumerate(items):
            if not self._may_expand(0):
                # Out of time: the rest is not expanded, so what it may do is not known.
                self._opaque(ctx)
                return
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
                    inner_items = (
                        None
                        if producers_of(inner)
                        else _bounded_items(resolve(inner, self._results))
                    )
                    if inner_items is not None:
                        self._expand_comprehension(
                            node, level + 1, inner_items, origins_of(inner), overlay, element
                        )
                elif isinstance(node, ast.DictComp):
                    self._expr(node.key, element)
                    self._expr(node.value, element)
                else:
                    self._expr(node.elt, element)
