"""The whitelisted builtins the evaluator may call, each bounded before the real one runs.

Each handler receives (budget, args, kwargs) with every argument already evaluated, and
returns the value CPython's builtin returns. Arguments that are not plain are refused
before the real builtin sees them, so no internal object (``Lazy``, ``Closure``,
``BuiltinRef``) can leak into a real call. Iterator builtins (``zip``, ``map``, ...) return
a drained ``Lazy``; functions passed to ``sorted``/``map``/... are only whitelisted
builtins or lambdas evaluated in place (``KEY_FUNCTIONS``, ``Closure``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._exceptions import NotKnown
from ._budget import NUMBERS, Budget, BuiltinRef, Closure, Lazy, ViewTypes, sortable, truth
from ._sizes import check_format_spec, check_power

Handler = Callable[[Budget, tuple[Any, ...], dict[str, Any]], object]
BUILTINS: dict[str, Handler] = {}
"""The builtins the evaluator runs exactly, by name: each handler checks its arguments and
spends the budget; a call of any other name has no known value (``NotKnown``)."""

TYPE_NAMES: dict[str, type] = {
    "str": str, "int": int, "float": float, "bool": bool, "bytes": bytes, "tuple": tuple,
    "list": list, "dict": dict, "set": set, "frozenset": frozenset, "range": range,
}  # fmt: skip
"""Builtin types usable as the second argument of ``isinstance``."""

KEY_FUNCTIONS = frozenset(
    {"len", "abs", "bool", "str", "int", "float", "repr", "ord", "chr", "tuple"}
)
"""Builtins accepted as ``key=`` or as the function of ``map``/``filter``."""


def _builtin(name: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        BUILTINS[name] = fn
        return fn

    return register


def plain_args(b: Budget, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    for a in args:
        b.size(a)
    for a in kwargs.values():
        b.size(a)


def no_kwargs(kwargs: dict[str, Any]) -> None:
    if kwargs:
        raise NotKnown("unexpected keyword arguments")


def call_builtin(b: Budget, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    """Call the whitelisted builtin ``name``; NotKnown if it is not whitelisted or refuses."""
    handler = BUILTINS.get(name)
    if handler is None:
        raise NotKnown(f"{name!r} is not a whitelisted builtin")
    return b.check(handler(b, args, kwargs))


def _apply(b: Budget, fn: Any, *args: object) -> object:
    if type(fn) is Closure:
        return fn.call(args, {})
    if type(fn) is not BuiltinRef or fn.name not in KEY_FUNCTIONS:
        raise NotKnown("only whitelisted builtins may be passed as functions")
    return call_builtin(b, fn.name, args, {})


def _keys(b: Budget, key: Any, items: list[Any]) -> list[Any]:
    """Key values, each safe to compare (plain, bounded, no NaN inside a container)."""
    keys = [_apply(b, key, x) for x in items]
    for k in keys:
        b.comparable(k)
    return keys


def _simple(name: str, fn: Callable[..., object]) -> None:
    """A builtin whose cost is bounded by the size of its (measured) plain arguments."""

    def handler(b: Budget, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
        plain_args(b, args, kwargs)
        return fn(*args, **kwargs)

    BUILTINS[name] = handler


_SIMPLE: dict[str, Callable[..., object]] = {
    "bool": bool, "abs": abs, "chr": chr, "ord": ord,
    "hex": hex, "oct": oct, "bin": bin, "divmod": divmod,
}  # fmt: skip
for _name, _fn in _SIMPLE.items():
    _simple(_name, _fn)
del _name, _fn


@_builtin("tuple")
def _tuple(b: Budget, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    no_kwargs(kwargs)
    return tuple(*(b.items(a) for a in args))


@_builtin("list")
def _list(b: Budget, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    no_kwargs(kwargs)
    return list(*(b.items(a) for a in args))


@_builtin("set")
def _set(b: Budget, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    no_kwargs(kwargs)
    items = [b.items(a, order_free=True) for a in args]
    for group in items:
        for x in group:
            b.nan_free(x)
        b.hashed(list(group))
    return set(*items)


@_builtin("frozenset")
def _frozenset(b: Budget, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    return frozenset(_set(b, args, kwargs))  # type: ignore[call-overload]


@_builtin("dict")
def _dict(b: Budget, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    if len(args) > 1:
        raise NotKnown("dict expected at most 1 argument")
    out: dict[object, object] = {}
    if args:
        src = args[0]
        if type(src) is dict:
            b.nan_free(src)
            out = dict(src)
        else:
            pairs = b.items(src)
            for p in pairs:
                b.nan_free(p)
            b.hashed([p[0] if type(p) in (tuple, list) and len(p) == 2 else p for p in pairs])  # type: ignore[arg-type,index]
            out = dict(pairs)  # type: ignore[arg-type]
    for k, v in kwargs.items():
        b.size(v)
        out[k] = v
    return out


@_builtin("str")
def _str(b: Budget, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    no_kwargs(kwargs)
    if len(args) > 1:
        raise NotKnown("str() decoding form is not evaluated")
    if not args:
        return ""
    b.printable(args[0])
    return str(args[0])


def _text_form(name: str, fn: Callable[[object], str]) -> None:
    def handler(b: Budget, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
        no_kwargs(kwargs)
        (value,) = args
        b.printable(value)
        return fn(value)

    BUILTINS[name] = handler


_text_form("repr", repr)
_text_form("ascii", ascii)


@_builtin("format")
def _format(b: Budget, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    no_kwargs(kwargs)
    if not 1 <= len(args) <= 2:
        raise NotKnown("format() takes 1 or 2 arguments")
    spec = args[1] if len(args) == 2 else ""
    return format_value(b, args[0], spec)


def format_value(b: Budget, value: Any, spec: Any) -> str:
    """``format(value, spec)`` with the width and size checks done first."""
    check_format_spec(spec, b.limits)
    b.printable(value)
    return format(value, spec)


@_builtin("int")
def _int(b: Budget, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    plain_args(b, args, kwargs)
    _refuse_long_numeral(args)
    return int(*args, **kwargs)


_MAX_NUMERAL = 5_000
"""Longest text ``int()``/``float()`` parse here: beyond CPython's 4300-digit int limit, and
long enough for any float literal, while keeping parsing cost trivial."""


def _refuse_long_numeral(args: tuple[Any, ...]) -> None:
    if args and type(args[0]) in (str, bytes) and len(args[0]) > _MAX_NUMERAL:
        raise NotKnown("numeral text too long")


@_builtin("float")
def _float(b: Budget, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    plain_args(b, args, kwargs)
    _refuse_long_numeral(args)
    return float(*args, **kwargs)


@_builtin("len")
def _len(b: Budget, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    no_kwargs(kwargs)
    (x,) = args
    if type(x) is Lazy or type(x) is BuiltinRef:
        raise NotKnown("len() of an object without a length")
    return len(x)


@_builtin("range")
def _range(b: Budget, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    no_kwargs(kwargs)
    for a in args:
        if type(a) not in (int, bool):
            raise NotKnown("range() of a non-integer")
        b.size(a)
    return range(*args)


@_builtin("pow")
def _pow(b: Budget, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    plain_args(b, args, kwargs)
    if kwargs or not 2 <= len(args) <= 3:
        raise NotKnown("pow() arguments not evaluated")
    if len(args) == 2:
        check_power(b, args[0], args[1])
        return pow(args[0], args[1])
    return pow(*args)


@_builtin("round")
def _round(b: Budget, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    plain_args(b, args, kwargs)
    nd = kwargs.get("ndigits", args[1] if len(args) > 1 else None)
    if type(nd) in (int, bool) and nd < -(b.limits.max_int_bits // 3):  # type: ignore[operator]
        raise NotKnown("round() to too many digits")
    return round(*args, **kwargs)


def _key_and_default(kwargs: dict[str, Any], allowed: frozenset[str]) -> None:
    if not set(kwargs) <= allowed:
        raise NotKnown("unexpected keyword arguments")


def _minmax(fn: Callable[..., object]) -> Handler:
    def handler(b: Budget, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
        _key_and_default(kwargs, frozenset({"key", "default"}))
        key = kwargs.get("key")
        if len(args) == 1:
            items = list(b.items(args[0], order_free=key is None and sortable(args[0])))
        elif len(args) >= 2 and "default" not in kwargs:
            items = list(args)
        else:
            raise NotKnown("min()/max() arguments")
        if not items:
            if "default" in kwargs:
                b.size(kwargs["default"])
                return kwargs["default"]
            raise NotKnown("min()/max() of an empty sequence")
        for x in items:
            b.comparable(x)
        if key is None:
            return fn(items)
        keys = _keys(b, key, items)
        best: Any = fn(range(len(items)), key=keys.__getitem__)
        return items[best]

    return handler


BUILTINS["min"] = _minmax(min)
BUILTINS["max"] = _minmax(max)


@_builtin("sorted")
def _sorted(b: Budget, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    _key_and_default(kwargs, frozenset({"key", "reverse"}))
    (iterable,) = args
    key = kwargs.get("key")
    reverse = kwargs.get("reverse", False)
    if type(reverse) not in (bool, int):
        raise NotKnown("sorted(reverse=...) is not an int")
    items = list(b.items(iterable, order_free=key is None and sortable(iterable)))
    for x in items:
        b.comparable(x)
    b.charge(len(items) * max(1, len(items).bit_length()))
    if key is None:
        return sorted(items, reverse=reverse)
    keys = _keys(b, key, items)
    order = sorted(range(len(items)), key=keys.__getitem__, reverse=reverse)
    return [items[i] for i in order]


@_builtin("sum")
def _sum(b: Budget, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    _key_and_default(kwargs, frozenset({"start"}))
    if not 1 <= len(args) <= 2 or (len(args) == 2 and "start" in kwargs):
        raise NotKnown("sum() arguments")
    start = args[1] if len(args) == 2 else kwargs.get("start", 0)
    items = b.items(args[0])
    if type(start) not in NUMBERS or any(type(x) not in NUMBERS for x in items):
        raise NotKnown("sum() is evaluated on numbers only")
    for x in items:
        b.size(x)
    return sum(items, start)


@_builtin("any")
def _any(b: Budget, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    no_kwargs(kwargs)
    (iterable,) = args
    return any(truth(x) for x in b.items(iterable, order_free=True))


@_builtin("all")
def _all(b: Budget, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    no_kwargs(kwargs)
    (iterable,) = args
    return all(truth(x) for x in b.items(iterable, order_free=True))


@_builtin("reversed")
def _reversed(b: Budget, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    no_kwargs(kwargs)
    (seq,) = args
    if type(seq) not in (str, bytes, tuple, list, range, dict) and type(seq) not in ViewTypes:
        raise NotKnown("reversed() of a non-sequence")
    return Lazy(list(reversed(b.items(seq))))


@_builtin("enumerate")
def _enumerate(b: Budget, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    _key_and_default(kwargs, frozenset({"start"}))
    if not 1 <= len(args) <= 2 or (len(args) == 2 and "start" in kwargs):
        raise NotKnown("enumerate() arguments")
    start = args[1] if len(args) == 2 else kwargs.get("start", 0)
    if type(start) not in (int, bool):
        raise NotKnown("enumerate() start is not an int")
    b.size(start)
    return Lazy(list(enumerate(b.items(args[0]), start)))


@_builtin("zip")
def _zip(b: Budget, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    _key_and_default(kwargs, frozenset({"strict"}))
    strict = truth(kwargs.get("strict", False))
    columns = [b.items(a) for a in args]
    if strict and len({len(c) for c in columns}) > 1:
        raise NotKnown("zip(strict=True) of unequal lengths")
    return Lazy(list(zip(*columns, strict=False)))


@_builtin("map")
def _map(b: Budget, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    no_kwargs(kwargs)
    if len(args) < 2:
        raise NotKnown("map() needs a function and an iterable")
    fn, *iterables = args
    columns = [b.items(a) for a in iterables]
    return Lazy([_apply(b, fn, *row) for row in zip(*columns, strict=False)])


@_builtin("filter")
def _filter(b: Budget, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    no_kwargs(kwargs)
    fn, iterable = args
    items = b.items(iterable)
    if fn is None:
        return Lazy([x for x in items if truth(x)])
    return Lazy([x for x in items if truth(_apply(b, fn, x))])


@_builtin("isinstance")
def _isinstance(b: Budget, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    no_kwargs(kwargs)
    value, spec = args
    b.size(value)
    refs = spec if type(spec) is tuple else (spec,)
    types: list[type] = []
    for ref in refs:
        if type(ref) is not BuiltinRef or ref.name not in TYPE_NAMES:
            raise NotKnown("isinstance() against something other than a builtin type")
        types.append(TYPE_NAMES[ref.name])
    return isinstance(value, tuple(types))
