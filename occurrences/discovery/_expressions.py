"""Discovery of the occurrences inside expressions, and expansion of calls and comprehensions.

An expression is walked in evaluation order (``_scan``): each call of a trusted capability
method becomes an occurrence, whose arguments are evaluated by the exact evaluator once
the results they read are in; a capability used any other way escapes; program-defined
functions called with known arguments are expanded (their body's calls get the calling
position in their path); comprehensions over known or resulting iterables are expanded
one element at a time; operands that short-circuiting may skip are discardable. Nested
capability calls are replaced by synthetic names (``$0``, ...) in a copy of the expression,
never by mutating the AST.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from .._exceptions import NotKnown
from ..evaluator._evaluator import UNKNOWN, evaluate_call_arguments, free_names
from ..evaluator._pure import BUILTINS, TYPE_NAMES
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
    Result,
    Scope,
    Unpacked,
    data_origins,
    evaluator_env,
    is_immutable,
    may_be_mutable,
    origins_of,
    producers_of,
    resolve,
    union_origins,
)
from ._control import (
    MAX_CALL_DEPTH,
    NON_MUTATING_METHODS,
    OPAQUE_BUILTINS,
    _assigned_names,
    _bounded_items,
    _Branch,
    _Context,
    _Exit,
    _frame,
    _Leave,
    _listed,
    _substitute,
    _truth,
)
from ._effect import Effect
from ._effects import _Effects
from ._model import ControlKind, MethodSpec, Occurrence, OccurrenceId, Site
from ._scopes import Everything, Prior, may_see, scope_path


class _Expressions(_Effects):
    """Expression handling; ``Discovery`` adds the statements."""

    def _body(self, body: Sequence[ast.stmt], ctx: _Context) -> None:
        raise NotImplementedError  # statements: provided by Discovery

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
            for child in ast.iter_child_nodes(node):
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
        for inner in ast.walk(fn.body):
            if isinstance(inner, ast.NamedExpr | ast.Await | ast.Yield | ast.YieldFrom | ast.Lambda):
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

    def _short_circuit(self, node: ast.BoolOp, index: int, ctx: _Context, subst: dict[int, tuple[str, Binding]]) -> None:
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
            sides.append((if_true if decided else if_false, replace(ctx, control=(*ctx.control, frame))))
        else:
            on_true, on_false = _Branch(producers), _Branch(producers)
            if producers and ctx.emit:
                self._when_known(producers, self._decider(test, [on_true], [on_false]))
            for parts, branch in ((if_true, on_true), (if_false, on_false)):
                branches = (*ctx.branches, branch) if ctx.emit else ctx.branches
                sides.append((parts, replace(ctx, control=(*ctx.control, frame), branches=branches)))
        for parts, inner in sides:
            for part in parts:
                if isinstance(part, ast.expr):
                    self._scan(part, inner, subst)
                else:
                    part(inner)

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

    def _occurrence(
        self, call: ast.Call, capability: str, method: str, ctx: _Context, subst: dict[int, tuple[str, Binding]]
    ) -> Binding:
        spec = self._capabilities.get(capability, {}).get(method)
        effect = spec.effect if spec is not None else Effect.UNKNOWN
        prior = ctx.written.prior(capability)
        scope: Binding = UNKNOWN  # the value of the declared scope argument, where it matters
        if (
            ctx.emit  # a body followed once for its effects may run with other values
            and spec is not None
            and spec.scope is not None
            and effect is not Effect.UNKNOWN
            and (effect.may_write or (prior and not isinstance(prior, Everything)))
        ):
            scope = self._scope_argument(call, spec, ctx, subst)
        if effect.may_write:
            # Only a scope known now narrows a write: waiting would make what follows
            # depend on when results arrive.
            ctx.written.add_scoped(capability, None if producers_of(scope) else scope_path(resolve(scope, self._results)))
        if not ctx.emit:
            # Unknown, but plain data of its own: the Guest gets every result fresh.
            return Mutated(frozenset({self._origin(call)}))
        if ctx.path and not self._may_expand(1):
            return UNKNOWN
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
        pre_write, overlapping = self._pre_write(prior, scope, effect)
        discardable, dead = self._control_of(ctx.branches)
        occurrence = Occurrence(oid, effect, pre_write, data, control, discardable, dead, self._order)
        self._order += 1
        if ctx.branches:
            self._branches_of[oid] = ctx.branches
            for branch in ctx.branches:
                branch.members.append(oid)
        self._sink.discovered(occurrence)
        final_call = args_call
        self._when_known(data, lambda: self._arguments(oid, final_call, captured, overlapping))
        return Result(oid) if effect.speculable and pre_write else UNKNOWN

    def _scope_argument(
        self, call: ast.Call, spec: MethodSpec, ctx: _Context, subst: dict[int, tuple[str, Binding]]
    ) -> Binding:
        """The binding of the argument ``call`` passes for ``spec.scope``; ``UNKNOWN`` when
        it cannot be told from the source (``*args``/``**kwargs``, omitted for its default,
        passed twice)."""
        found: ast.expr | None = None
        for keyword in call.keywords:
            if keyword.arg is None:
                return UNKNOWN
            if keyword.arg == spec.scope:
                found = keyword.value
        position = spec.scope_position
        if position is not None:
            if any(isinstance(a, ast.Starred) for a in call.args):
                return UNKNOWN
            if position < len(call.args):
                if found is not None:
                    return UNKNOWN
                found = call.args[position]
        return UNKNOWN if found is None else self._value(found, ctx, subst)

    def _pre_write(self, prior: Prior, scope: Binding, effect: Effect) -> tuple[bool, Callable[[], bool] | None]:
        """Whether a call of ``scope`` after the writes ``prior`` is pre-write, and, when that
        waits on results its scope reads, the test to apply once they are in (the call is
        then provisionally pre-write)."""
        if not prior:
            return True, None
        if isinstance(prior, Everything) or scope is UNKNOWN:
            return False, None
        if not producers_of(scope):
            return not may_see(prior, scope_path(resolve(scope, self._results))), None
        if not effect.speculable:
            return False, None  # never early anyway: nothing to wait for
        return True, lambda: may_see(prior, scope_path(resolve(scope, self._results)))

    def _arguments(
        self,
        oid: OccurrenceId,
        call: ast.Call,
        captured: dict[str, Binding],
        overlapping: Callable[[], bool] | None = None,
    ) -> None:
        """Report the call's arguments, or that they are unknown - also when ``overlapping``
        finds that a write before it may have changed what it reads (it is not pre-write:
        it must never run early, and what reads its result is unknown)."""
        try:
            args, kwargs = evaluate_call_arguments(call, evaluator_env(captured, self._results))
        except (NotKnown, RecursionError):
            self._sink.arguments_unknown(oid)
            return
        if overlapping is not None and overlapping():
            self._sink.arguments_unknown(oid)
            return
        self._sink.arguments_known(oid, args, kwargs)

    # -- functions ----------------------------------------------------------------------

    def _call_function(
        self, ref: FunctionRef, call: ast.Call, ctx: _Context, subst: dict[int, tuple[str, Binding]]
    ) -> Binding:
        if self._harmless(ref.node, ctx):
            return UNKNOWN  # it only computes a value, which the evaluator does not follow
        bound = self._bind_parameters(ref, call, ctx, subst)
        if bound is None and self._walk_for_effects(ref, call, ctx, subst):
            return UNKNOWN
        if (
            bound is None
            or not ctx.emit
            or ctx.depth >= MAX_CALL_DEPTH
            or not self._may_expand(1)
        ):
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
        if any(isinstance(ctx.scope.lookup(n), ModuleRef) for a in arguments for n in free_names(a)):
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
            everything = union_origins([*found.values(), *(frozenset() if is_immutable(d) else None for d in ref.defaults)])
            return dict.fromkeys(params, everything)
        return {
            name: found[name] if name in found else (frozenset() if is_immutable(defaults.get(name, UNKNOWN)) else None)
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
            base, written = ctx.scope.snapshot(node), ctx.written.copy()

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
                    inner_items = None if producers_of(inner) else _bounded_items(resolve(inner, self._results))
                    if inner_items is not None:
                        self._expand_comprehension(node, level + 1, inner_items, origins_of(inner), overlay, element)
                elif isinstance(node, ast.DictComp):
                    self._expr(node.key, element)
                    self._expr(node.value, element)
                else:
                    self._expr(node.elt, element)
