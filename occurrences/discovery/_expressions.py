"""Discovery of the occurrences inside expressions, walked in CPython's evaluation order.

An expression is walked in evaluation order (``_scan``): each call of a trusted capability
method becomes an occurrence (``_occurrences``); a capability used any other way escapes;
calls of program-defined functions (``_functions``) and comprehensions
(``_comprehensions``) are handed to the layers that expand them; operands that
short-circuiting may skip are discardable; library and unknown calls apply their effects.
Nested capability calls are replaced by synthetic names (``$0``, ...) in a copy of the
expression, never by mutating the AST.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from ..evaluator import BUILTINS, TYPE_NAMES, UNKNOWN, child_nodes, free_names, walk
from ._bindings import (
    Binding,
    CapabilityRef,
    Derived,
    FunctionRef,
    Known,
    MethodRef,
    ModuleRef,
    Mutated,
    Result,
    Unpacked,
    may_be_mutable,
    origins_of,
    producers_of,
    resolve,
    union_origins,
)
from ._control import (
    NON_MUTATING_METHODS,
    OPAQUE_BUILTINS,
    _Branch,
    _Context,
    _frame,
    _listed,
    _truth,
)
from ._model import ControlKind
from ._occurrences import _Occurrences


class _Expressions(_Occurrences):
    """Expression handling; ``_Functions`` and ``_Comprehensions`` expand what it hands
    them, ``Discovery`` adds the statements."""

    def _body(self, body: Sequence[ast.stmt], ctx: _Context) -> None:
        raise NotImplementedError  # statements: provided by Discovery

    def _call_function(
        self, ref: FunctionRef, call: ast.Call, ctx: _Context, subst: dict[int, tuple[str, Binding]]
    ) -> Binding:
        raise NotImplementedError  # provided by _Functions

    def _comprehension(
        self,
        node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp,
        ctx: _Context,
        subst: dict[int, tuple[str, Binding]],
    ) -> None:
        raise NotImplementedError  # provided by _Comprehensions

    # -- assignment targets -------------------------------------------------------------

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
            received = origins_of(value)
            if isinstance(target, ast.Subscript):
                received = union_origins((received, origins_of(self._expr(target.slice, ctx))))
            self._mutated(ctx, origins_of(receiver), received)

    def _unpack(self, value: Binding, index: int, count: int) -> Binding:
        if isinstance(value, Known):
            if type(value.value) in (tuple, list, str, bytes, dict):
                items = list(value.value)  # type: ignore[call-overload]
                if len(items) == count:
                    return Known(items[index], origins_of(value))
            return UNKNOWN
        if isinstance(value, Result | Derived | Unpacked):
            return Unpacked(value, index, count)
        if isinstance(value, Mutated):
            return value  # an item of it shares its origins
        return UNKNOWN

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

    def _scan_all(
        self, nodes: Iterable[ast.expr | None], ctx: _Context, subst: dict[int, tuple[str, Binding]]
    ) -> None:
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
            if not self._harmless(node, ctx):
                self._opaque(ctx)  # whatever receives it may run it
        elif isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
            self._comprehension(node, ctx, subst)
        elif isinstance(node, ast.BoolOp):
            self._short_circuit(node, 0, ctx, subst)
        elif isinstance(node, ast.IfExp):
            self._scan(node.test, ctx, subst)
            self._choice(node.test, node, [node.body], [node.orelse], ctx, subst)
        elif isinstance(node, ast.NamedExpr):
            self._scan(node.value, ctx, subst)
            # It may sit in a part that does not run; exactness over coverage.
            self._bind(node.target.id, UNKNOWN, ctx)
        else:
            for child in child_nodes(node):
                self._scan(child, ctx, subst)

    def _escape(self, b: Binding | None, ctx: _Context) -> None:
        if isinstance(b, CapabilityRef | MethodRef):
            self._distrust(b.capability, ctx)
        elif isinstance(b, FunctionRef) and not self._harmless(b.node, ctx):
            self._opaque(ctx)

    def _harmless(self, fn: ast.AST, ctx: _Context) -> bool:
        """Whether running ``fn`` (a ``lambda``) can only compute a value: it calls nothing
        but builtins and non-mutating methods, names no capability or program function,
        and binds nothing. Handing such a lambda to ``sorted``/``map``/... is not unknown
        code. Judged with the names as bound where it is handed out."""
        if not isinstance(fn, ast.Lambda):
            return False
        a = fn.args
        params = {p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg] if p}
        for inner in walk(fn.body):
            if isinstance(
                inner, ast.NamedExpr | ast.Await | ast.Yield | ast.YieldFrom | ast.Lambda
            ):
                return False
            if isinstance(inner, ast.Name) and inner.id not in params:
                named = ctx.scope.lookup(inner.id)
                if isinstance(named, CapabilityRef | MethodRef | FunctionRef | ModuleRef):
                    return False
            if isinstance(inner, ast.Call):
                func = inner.func
                if isinstance(func, ast.Name):
                    pure = func.id in BUILTINS or func.id in TYPE_NAMES
                    if not pure or func.id in params or ctx.scope.lookup(func.id) is not None:
                        return False
                elif not (isinstance(func, ast.Attribute) and func.attr in NON_MUTATING_METHODS):
                    return False
        return True

    @staticmethod
    def _root(node: ast.expr, ctx: _Context) -> Binding | None:
        """The binding of the name a chain like ``a.b[0].c()`` starts from."""
        while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
            node = node.func if isinstance(node, ast.Call) else node.value
        return ctx.scope.lookup(node.id) if isinstance(node, ast.Name) else None

    def _short_circuit(
        self, node: ast.BoolOp, index: int, ctx: _Context, subst: dict[int, tuple[str, Binding]]
    ) -> None:
        """``a and b and c``: each operand runs only if the previous one was true (false
        for ``or``), decided like an ``if`` on it."""
        self._scan(node.values[index], ctx, subst)
        if index + 1 == len(node.values):
            return
        rest = [lambda inner: self._short_circuit(node, index + 1, inner, subst)]
        if isinstance(node.op, ast.And):
            self._choice(node.values[index], node, rest, [], ctx, subst)
        else:
            self._choice(node.values[index], node, [], rest, ctx, subst)

    def _choice(
        self,
        test_node: ast.expr,
        node: ast.expr,
        if_true: Sequence[ast.expr | Callable[[_Context], None]],
        if_false: Sequence[ast.expr | Callable[[_Context], None]],
        ctx: _Context,
        subst: dict[int, tuple[str, Binding]],
    ) -> None:
        """Parts of an expression that run only if ``test_node`` is true (or false): a known
        test follows one side only; one that reads results is decided when they arrive;
        otherwise both sides are discardable for good."""
        test = self._value(test_node, ctx, subst)
        producers = producers_of(test)
        decided = None if producers else _truth(resolve(test, self._results))
        frame = _frame(ControlKind.CONDITIONAL, node)
        sides: list[tuple[Sequence[ast.expr | Callable[[_Context], None]], _Context]] = []
        if decided is not None:
            sides.append(
                (if_true if decided else if_false, replace(ctx, control=(*ctx.control, frame)))
            )
        else:
            on_true, on_false = _Branch(producers), _Branch(producers)
            if producers and ctx.emit:
                self._when_known(producers, self._decider(test, [on_true], [on_false]))
            for parts, branch in ((if_true, on_true), (if_false, on_false)):
                branches = (*ctx.branches, branch) if ctx.emit else ctx.branches
                sides.append(
                    (parts, replace(ctx, control=(*ctx.control, frame), branches=branches))
                )
        for parts, inner in sides:
            for part in parts:
                if isinstance(part, ast.expr):
                    self._scan(part, inner, subst)
                else:
                    part(inner)

    def _scan_call(
        self, node: ast.Call, ctx: _Context, subst: dict[int, tuple[str, Binding]]
    ) -> None:
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
            # Library code: it may mutate what it is handed (an unknown value may be
            # anything), and make it hold anything it kept from earlier calls; nothing else.
            handed = [
                b
                for arg in arguments
                for n in free_names(arg)
                if may_be_mutable(b := ctx.scope.lookup(n)) or b is UNKNOWN
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
                    # The receiver may come to hold what the method is handed.
                    passed = (self._value(a, ctx, subst) for a in arguments)
                    received = union_origins([origins_of(receiver), *map(origins_of, passed)])
                    self._mutated(ctx, origins_of(receiver), received)
            return
        # Calling a value that is not a known function: unknown code.
        self._scan(func, ctx, subst)
        self._scan_all(arguments, ctx, subst)
        self._opaque(ctx)
