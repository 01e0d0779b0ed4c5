"""Program-defined functions at their call sites: expanded, walked for effects, or opaque.

A function called with known arguments is expanded (bounded depth): its body is walked in
a fresh local scope and its calls get the calling position in their path. Called from
module level with arguments not all known, its body is walked once for its effects only.
Anything else is unknown code (``_opaque``). See ``_discovery`` for the rules as a whole.
"""

from __future__ import annotations

import ast
from dataclasses import replace

from ..evaluator import UNKNOWN, free_names
from ._bindings import (
    Binding,
    FunctionRef,
    Known,
    ModuleRef,
    Mutated,
    Origins,
    Scope,
    data_origins,
    is_immutable,
    union_origins,
)
from ._control import (
    MAX_CALL_DEPTH,
    _Context,
    _Exit,
    _frame,
    _Leave,
)
from ._expressions import _Expressions
from ._model import ControlKind


class _Functions(_Expressions):
    """Calls of program-defined functions (``_call_function``)."""

    def _call_function(
        self, ref: FunctionRef, call: ast.Call, ctx: _Context, subst: dict[int, tuple[str, Binding]]
    ) -> Binding:
        if self._harmless(ref.node, ctx):
            return UNKNOWN  # it only computes a value, which the evaluator does not follow
        bound = self._bind_parameters(ref, call, ctx, subst)
        if bound is None and self._walk_for_effects(ref, call, ctx, subst):
            return UNKNOWN
        if bound is None or not ctx.emit or ctx.depth >= MAX_CALL_DEPTH or not self._may_expand(1):
            self._opaque(ctx)
            return UNKNOWN
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
            with self._expanding():
                self._body(fn.body, inner)
        except _Leave as leave:
            value = leave.value
        return UNKNOWN if exit_.maybe else value

    def _walk_for_effects(
        self, ref: FunctionRef, call: ast.Call, ctx: _Context, subst: dict[int, tuple[str, Binding]]
    ) -> bool:
        """A call whose arguments are not all known: when its body can be followed, apply
        only what it may do (writes, mutations, unknown code it calls) by walking it once
        without reporting occurrences, its parameters holding unknown values; True if done.

        Left to ``_opaque`` (False): code not followed exactly itself, a call from inside
        a function (the body's mutations must reach every name that may see them, and only
        the module's are in reach), a function that is not plainly expandable (decorated,
        ``global``/``nonlocal``, generators, ``*args``...), and a module handed to it.
        Program functions it calls are unknown code in turn, so recursion stops at once."""
        fn = ref.node
        if (
            not ctx.emit
            or ctx.scope is not ctx.globals
            or not ref.expandable
            or not isinstance(fn, ast.FunctionDef)
        ):
            return False
        arguments = [*call.args, *(k.value for k in call.keywords)]
        if any(
            isinstance(ctx.scope.lookup(n), ModuleRef) for a in arguments for n in free_names(a)
        ):
            return False
        if not self._may_expand(1):
            return False
        local = Scope(ctx.globals)
        for name, origins in self._parameter_origins(ref, call, ctx, subst).items():
            local.bind(name, UNKNOWN if origins is None else Mutated(origins))
        inner = replace(ctx, scope=local, emit=False, depth=ctx.depth + 1, loop=None, function=None)
        with self._expanding():
            self._body(fn.body, inner)
        return True

    def _parameter_origins(
        self, ref: FunctionRef, call: ast.Call, ctx: _Context, subst: dict[int, tuple[str, Binding]]
    ) -> dict[str, Origins]:
        """What each parameter of ``ref`` may share structure with in ``call``: its argument's
        origins, a default's (a mutable default is shared by every call: anything), or, when
        the call does not map arguments to parameters plainly, all of them together."""
        params = [a.arg for a in ref.node.args.args]
        defaults = dict(zip(params[len(params) - len(ref.defaults) :], ref.defaults, strict=True))
        pairs = [*zip(params, call.args, strict=False), *((k.arg, k.value) for k in call.keywords)]
        found = {name: data_origins(self._value(expr, ctx, subst)) for name, expr in pairs}
        plain = (
            len(call.args) <= len(params)
            and not any(isinstance(a, ast.Starred) for a in call.args)
            and len(found) == len(pairs)
            and set(found) <= set(params)
        )
        if not plain:
            everything = union_origins(
                [*found.values(), *(frozenset() if is_immutable(d) else None for d in ref.defaults)]
            )
            return dict.fromkeys(params, everything)
        return {
            name: found[name]
            if name in found
            else (frozenset() if is_immutable(defaults.get(name, UNKNOWN)) else None)
            for name in params
        }

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
        for name, default in zip(
            params[len(params) - len(ref.defaults) :], ref.defaults, strict=True
        ):
            bound.setdefault(name, Known(default))
        return bound if len(bound) == len(params) else None
