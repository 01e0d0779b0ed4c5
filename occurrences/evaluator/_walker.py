"""The evaluator's walk over an expression's AST, one handler per node type.

Handlers are dispatched by node type with a refusing fallback, in the manner of pyflakes'
checker: any node not in ``_HANDLERS`` is ``NotKnown``. Each handler computes its node's
value with CPython's own operators, builtins and methods (``_operators``, ``_builtins``,
``_methods``) on values the ``Budget`` has measured. Comprehensions and lambdas follow
CPython's scoping (``Scope``: a stack of frames, innermost last).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Final, TypeVar

from .._exceptions import NotKnown
from ..plain import fresh_copy
from ._budget import Budget, BuiltinRef, Closure, Lazy, Limits, truth
from ._builtins import BUILTINS, TYPE_NAMES, call_builtin, format_value
from ._free_names import target_names
from ._methods import call_method
from ._operators import binary, compare, unary
from ._unknown import UNKNOWN

_CONVERSIONS: Final = {-1: None, 115: "str", 114: "repr", 97: "ascii"}  # f"{x!s}", !r, !a
_UNBOUND: Final = object()  # a comprehension-local name not yet assigned
_RESULT_TYPES = frozenset(
    {type(None), bool, int, float, str, bytes, tuple, list, dict, set, frozenset, range}
)

Scope = tuple[dict[str, object], ...]  # comprehension scopes, innermost last
T = TypeVar("T")


class Walker:
    """One evaluation: the environment, its budget and the current recursion depth."""

    __slots__ = ("_budget", "_depth", "_env", "_limits")

    def __init__(self, env: Mapping[str, object], limits: Limits) -> None:
        self._env = env
        self._limits = limits
        self._budget = Budget(limits)
        self._depth = 0  # current nesting of eval(); never above limits.max_depth

    def run(self, compute: Callable[[], T]) -> T:
        """Run ``compute``, turning every failure into ``NotKnown``."""
        try:
            return compute()
        except NotKnown:
            raise
        except Exception as exc:  # CPython's own errors, RecursionError and MemoryError too
            raise NotKnown(f"{type(exc).__name__}: {exc}") from None

    def export(self, value: object) -> object:
        """The value as handed out: plain (or set/range), bounded, and fresh."""
        if type(value) not in _RESULT_TYPES:
            raise NotKnown(f"value of type {type(value).__name__} is not returned")
        self._budget.size(value)
        if type(value) is set:
            return set(value)  # elements are hashable, hence immutable plain values
        return fresh_copy(value)

    # --- dispatch -------------------------------------------------------------------------

    def eval(self, node: ast.AST, scope: Scope) -> object:
        self._budget.charge()
        if self._depth >= self._limits.max_depth:
            raise NotKnown("expression nested too deeply")
        handler = _HANDLERS.get(type(node))
        if handler is None:
            raise NotKnown(f"{type(node).__name__} is not evaluated")
        self._depth += 1
        try:
            return handler(self, node, scope)
        finally:
            self._depth -= 1

    # --- leaves ---------------------------------------------------------------------------

    def _constant(self, node: ast.Constant, scope: Scope) -> object:
        value = node.value
        if type(value) not in (type(None), bool, int, float, str, bytes):
            raise NotKnown(f"constant of type {type(value).__name__}")
        self._budget.size(value)
        return value

    def _name(self, node: ast.Name, scope: Scope) -> object:
        return self.lookup(node.id, scope)

    def lookup(self, name: str, scope: Scope) -> object:
        if type(name) is not str or name.startswith("__"):
            raise NotKnown("dunder names are not evaluated")
        for frame in reversed(scope):
            if name in frame:
                value = frame[name]
                if value is _UNBOUND:
                    raise NotKnown(f"comprehension variable {name!r} read before assignment")
                return value
        if name in self._env:
            value = self._env[name]
            if value is UNKNOWN:
                raise NotKnown(f"{name!r} is not known")
            self._budget.size(value)  # exact plain types only, and within bounds
            return value
        if name in BUILTINS or name in TYPE_NAMES:
            return BuiltinRef(name)
        raise NotKnown(f"{name!r} is not bound to a known value")

    # --- operators ------------------------------------------------------------------------

    def _binop(self, node: ast.BinOp, scope: Scope) -> object:
        left = self.eval(node.left, scope)
        right = self.eval(node.right, scope)
        return binary(self._budget, type(node.op).__name__, left, right)

    def _unaryop(self, node: ast.UnaryOp, scope: Scope) -> object:
        return unary(self._budget, type(node.op).__name__, self.eval(node.operand, scope))

    def _boolop(self, node: ast.BoolOp, scope: Scope) -> object:
        want = type(node.op) is ast.Or  # `or` stops at the first true value, `and` at a false one
        if type(node.op) not in (ast.And, ast.Or) or not node.values:
            raise NotKnown("malformed boolean operation")
        value: object = None
        for operand in node.values:
            value = self.eval(operand, scope)
            if truth(value) == want:
                return value
        return value

    def _compare(self, node: ast.Compare, scope: Scope) -> object:
        if len(node.ops) != len(node.comparators) or not node.ops:
            raise NotKnown("malformed comparison")
        left = self.eval(node.left, scope)
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = self.eval(right_node, scope)
            if not compare(self._budget, type(op).__name__, left, right):
                return False
            left = right
        return True

    def _ifexp(self, node: ast.IfExp, scope: Scope) -> object:
        branch = node.body if truth(self.eval(node.test, scope)) else node.orelse
        return self.eval(branch, scope)

    # --- f-strings ------------------------------------------------------------------------

    def _joinedstr(self, node: ast.JoinedStr, scope: Scope) -> object:
        parts: list[str] = []
        total = 0
        for part in node.values:
            text = self.eval(part, scope)
            if type(text) is not str:
                raise NotKnown("malformed f-string")
            total += len(text)
            if total > self._limits.max_str_len:
                raise NotKnown("f-string too long")
            parts.append(text)
        return self._budget.check("".join(parts))

    def _formattedvalue(self, node: ast.FormattedValue, scope: Scope) -> object:
        value = self.eval(node.value, scope)
        conversion = _CONVERSIONS.get(node.conversion, "") if type(node.conversion) is int else ""
        if conversion == "":
            raise NotKnown("unknown f-string conversion")
        if conversion is not None:
            value = call_builtin(self._budget, conversion, (value,), {})
        spec = "" if node.format_spec is None else self.eval(node.format_spec, scope)
        return self._budget.check(format_value(self._budget, value, spec))

    # --- subscripts -----------------------------------------------------------------------

    def _subscript(self, node: ast.Subscript, scope: Scope) -> object:
        container = self.eval(node.value, scope)
        if type(container) not in (str, bytes, tuple, list, dict, range):
            raise NotKnown(f"subscript of {type(container).__name__}")
        if type(node.slice) is ast.Slice:
            bounds = [
                None if n is None else self.eval(n, scope)
                for n in (node.slice.lower, node.slice.upper, node.slice.step)
            ]
            if any(type(v) not in (type(None), int, bool) for v in bounds):
                raise NotKnown("slice bound is not an int")
            key: object = slice(*bounds)
            if type(container) is dict:
                raise NotKnown("dict subscript with a slice")
        else:
            key = self.eval(node.slice, scope)
            if type(container) is dict:
                self._budget.nan_free(key)  # a dict finds keys by identity first
            else:
                self._budget.size(key)
        return self._budget.check(container[key])  # type: ignore[index]

    # --- displays -------------------------------------------------------------------------

    def elements(self, nodes: list[ast.expr], scope: Scope) -> list[object]:
        """Values of display or argument elements, with ``*iterable`` expanded."""
        out: list[object] = []
        for element in nodes:
            if type(element) is ast.Starred:
                out.extend(self._budget.items(self.eval(element.value, scope)))
            else:
                out.append(self.eval(element, scope))
            if len(out) > self._limits.max_container_len:
                raise NotKnown("display too long")
        return out

    def _tuple(self, node: ast.Tuple, scope: Scope) -> object:
        return tuple(self.stored_all(self.elements(node.elts, scope)))

    def _list(self, node: ast.List, scope: Scope) -> object:
        return self.stored_all(self.elements(node.elts, scope))

    def _set(self, node: ast.Set, scope: Scope) -> object:
        items = self.stored_all(self.elements(node.elts, scope))
        for item in items:
            self._budget.nan_free(item)
        self._budget.hashed(items)
        return set(items)

    def _dict(self, node: ast.Dict, scope: Scope) -> object:
        if len(node.keys) != len(node.values):
            raise NotKnown("malformed dict display")
        pairs: list[tuple[object, object]] = []  # in order; built once its keys are checked
        for key_node, value_node in zip(node.keys, node.values, strict=True):
            if key_node is None:  # {**mapping}
                mapping = self.eval(value_node, scope)
                if type(mapping) is not dict:
                    raise NotKnown("** of a non-dict")
                self._budget.nan_free(mapping)
                pairs.extend(mapping.items())
            else:
                key = self.eval(key_node, scope)
                value = self.stored(self.eval(value_node, scope))
                self._budget.nan_free(key)
                pairs.append((key, value))
            if len(pairs) > self._limits.max_container_len:
                raise NotKnown("dict display too long")
        self._budget.hashed([key for key, _ in pairs])
        return dict(pairs)

    def stored(self, value: object) -> object:
        """Refuse a drained iterator where a value is kept (element, comprehension item).

        Invariant: a ``Lazy`` is consumed exactly once, by the expression that contains it.
        Stored and read twice it would replay items a real, exhausted iterator no longer has.
        """
        if type(value) is Lazy or type(value) is Closure:
            raise NotKnown(f"{type(value).__name__} stored in a container")
        return value

    def stored_all(self, values: list[object]) -> list[object]:
        for v in values:
            self.stored(v)
        return values

    # --- comprehensions -------------------------------------------------------------------

    def _listcomp(self, node: ast.ListComp, scope: Scope) -> object:
        return [self.stored(v) for v in self.comprehension(node.generators, (node.elt,), scope)]

    def _setcomp(self, node: ast.SetComp, scope: Scope) -> object:
        items = []
        for value in self.comprehension(node.generators, (node.elt,), scope):
            self._budget.nan_free(self.stored(value))
            items.append(value)
        self._budget.hashed(items)
        return set(items)

    def _generatorexp(self, node: ast.GeneratorExp, scope: Scope) -> object:
        items = self.comprehension(node.generators, (node.elt,), scope)
        return Lazy([self.stored(v) for v in items])

    def _dictcomp(self, node: ast.DictComp, scope: Scope) -> object:
        pairs: list[tuple[object, object]] = []
        values = self.comprehension(node.generators, (node.key, node.value), scope)
        for key in values:  # the generator yields key, then value, for each iteration
            value = next(values)
            self._budget.nan_free(key)
            pairs.append((key, self.stored(value)))
        self._budget.hashed([key for key, _ in pairs])
        return dict(pairs)

    def comprehension(
        self, generators: list[ast.comprehension], elts: tuple[ast.expr, ...], scope: Scope
    ) -> Iterator[object]:
        """Yield the element expressions' values for every iteration, in CPython's order."""
        if not generators or any(type(g.is_async) is not int or g.is_async for g in generators):
            raise NotKnown("async or empty comprehension")
        local: dict[str, object] = {}
        for gen in generators:
            for name in target_names(gen.target):
                local[name] = _UNBOUND
        first = self._budget.items(self.eval(generators[0].iter, scope))
        for produced, _ in enumerate(self._loop(generators, 0, first, (*scope, local))):
            for elt in elts:
                yield self.eval(elt, (*scope, local))
            if produced >= self._limits.max_container_len:
                raise NotKnown("comprehension too long")

    def _loop(
        self, generators: list[ast.comprehension], index: int, items: Iterable[object], scope: Scope
    ) -> Iterator[None]:
        gen = generators[index]
        for item in items:
            self._budget.charge()
            self.assign(gen.target, item, scope[-1])
            if all(truth(self.eval(cond, scope)) for cond in gen.ifs):
                if index + 1 == len(generators):
                    yield None
                else:
                    inner = self._budget.items(self.eval(generators[index + 1].iter, scope))
                    yield from self._loop(generators, index + 1, inner, scope)

    def assign(self, target: ast.expr, value: object, frame: dict[str, object]) -> None:
        """Bind ``target`` to ``value`` as a ``for`` clause does, unpacking included."""
        if type(target) is ast.Name:
            frame[target.id] = value
            return
        if not isinstance(target, ast.Tuple | ast.List):
            raise NotKnown("comprehension target is not a name or a tuple of names")
        items = list(self._budget.items(value))
        elts = target.elts
        stars = [i for i, e in enumerate(elts) if type(e) is ast.Starred]
        if not stars:
            if len(items) != len(elts):
                raise NotKnown("unpacking length mismatch")
            for sub, item in zip(elts, items, strict=True):
                self.assign(sub, item, frame)
            return
        if len(stars) > 1 or len(items) < len(elts) - 1:
            raise NotKnown("unpacking length mismatch")
        s = stars[0]
        after = len(elts) - s - 1
        for sub, item in zip(elts[:s], items[:s], strict=True):
            self.assign(sub, item, frame)
        starred = elts[s]
        assert isinstance(starred, ast.Starred)
        self.assign(starred.value, items[s : len(items) - after], frame)
        for sub, item in zip(elts[s + 1 :], items[len(items) - after :], strict=True):
            self.assign(sub, item, frame)

    # --- lambdas --------------------------------------------------------------------------

    def _lambda(self, node: ast.Lambda, scope: Scope) -> object:
        """A closure over ``scope``; only plain positional parameters, no defaults."""
        a = node.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.defaults or a.kw_defaults:
            raise NotKnown("lambda with defaults or variadic parameters")
        params = [p.arg for p in (*a.posonlyargs, *a.args)]
        positional_only = len(a.posonlyargs)
        if any(type(p) is not str or p.startswith("__") for p in params) or len(set(params)) != len(
            params
        ):
            raise NotKnown("malformed lambda parameters")

        def call(args: tuple[object, ...], kwargs: dict[str, object]) -> object:
            if len(args) > len(params):
                raise NotKnown("lambda called with too many arguments")
            frame: dict[str, object] = dict(zip(params, args, strict=False))
            for name, value in kwargs.items():
                if name in frame or name not in params[positional_only:]:
                    raise NotKnown(f"lambda got an unexpected argument {name!r}")
                frame[name] = value
            if len(frame) != len(params):
                raise NotKnown("lambda called with too few arguments")
            self._budget.charge()
            return self.eval(node.body, (*scope, frame))

        return Closure(call)

    # --- calls ----------------------------------------------------------------------------

    def arguments(self, call: ast.Call, scope: Scope) -> tuple[list[object], dict[str, object]]:
        args = self.elements(call.args, scope)
        kwargs: dict[str, object] = {}
        for kw in call.keywords:
            if kw.arg is not None and type(kw.arg) is not str:
                raise NotKnown("malformed keyword")
            if kw.arg is None:
                mapping = self.eval(kw.value, scope)
                if type(mapping) is not dict or any(type(k) is not str for k in mapping):
                    raise NotKnown("** of something other than a dict with str keys")
                pairs = list(mapping.items())
            else:
                pairs = [(kw.arg, self.eval(kw.value, scope))]
            for name, value in pairs:
                if name in kwargs:
                    raise NotKnown(f"repeated keyword argument {name!r}")
                kwargs[name] = value
        return args, kwargs

    def _call(self, node: ast.Call, scope: Scope) -> object:
        func = node.func
        if type(func) is ast.Attribute:
            if type(func.attr) is not str or func.attr.startswith("_"):
                raise NotKnown("private or dunder attribute")
            receiver = self.eval(func.value, scope)
            args, kwargs = self.arguments(node, scope)
            return call_method(self._budget, receiver, func.attr, tuple(args), kwargs)
        callee = self.eval(func, scope)
        if type(callee) is Closure:
            args, kwargs = self.arguments(node, scope)
            return callee.call(tuple(args), kwargs)
        if type(callee) is not BuiltinRef:
            raise NotKnown("call of something other than a whitelisted builtin")
        args, kwargs = self.arguments(node, scope)
        return call_builtin(self._budget, callee.name, tuple(args), kwargs)


_HANDLERS: dict[type, Callable[..., object]] = {
    ast.Constant: Walker._constant,
    ast.Name: Walker._name,
    ast.BinOp: Walker._binop,
    ast.UnaryOp: Walker._unaryop,
    ast.BoolOp: Walker._boolop,
    ast.Compare: Walker._compare,
    ast.IfExp: Walker._ifexp,
    ast.JoinedStr: Walker._joinedstr,
    ast.FormattedValue: Walker._formattedvalue,
    ast.Subscript: Walker._subscript,
    ast.Tuple: Walker._tuple,
    ast.List: Walker._list,
    ast.Set: Walker._set,
    ast.Dict: Walker._dict,
    ast.ListComp: Walker._listcomp,
    ast.SetComp: Walker._setcomp,
    ast.DictComp: Walker._dictcomp,
    ast.GeneratorExp: Walker._generatorexp,
    ast.Call: Walker._call,
    ast.Lambda: Walker._lambda,
}
"""Node types the evaluator understands; every other node (NamedExpr, Await,
Yield, Attribute outside a call, Starred outside a display, ...) is NotKnown."""
