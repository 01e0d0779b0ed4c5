"""The values, bounds and pure operations the argument evaluator may use in the Host.

Everything here runs CPython's own code, but only on values whose *exact* type is plain
(``None``, ``bool``, ``int``, ``float``, ``str``, ``bytes``, ``tuple``, ``list``, ``dict``,
plus ``set``, ``frozenset``, ``range`` and dict views as intermediates): a subclass could
override an operator, so a subclass is refused rather than trusted. On such values no
operation can reach user code.

Bounds come *before* work. An operation that can amplify its inputs (repetition, ``**``,
``<<``, padding widths, ``join``, ``replace``, ``%``-formatting, materializing a ``range``)
estimates its result size first and refuses (``NotKnown``) when it would exceed a limit.
Operations whose cost is linear in their inputs (comparison, hashing, ``repr``) first
*measure* the inputs: ``Budget.size`` walks a value once, charging one step per node, so a
value that is small in memory but huge logically (``[[0] * 10**4] * 10**4``) is refused
instead of being compared or printed element by element.

Two CPython details would otherwise break exactness. A set's iteration order depends on
hashes (``str`` hashes are randomized per process, a NaN's hash is its address) and on the
set's history, so sets are iterated, printed or joined only where order cannot show
(``sorted``, ``len``, ``in``, ``any``, ...). And container comparison, ``in``, ``index``
and dict lookups test ``is`` before ``==``, so with a NaN inside the answer depends on
object identity, which constant folding in the Guest's compiler decides: such operations
are refused (``Budget.nan_free``).
"""

from __future__ import annotations

import math
import operator
import re
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._exceptions import NotKnown
from .._plain import MAX_DEPTH


@dataclass(frozen=True, slots=True)
class Limits:
    """Hard bounds on one evaluation; exceeding any of them gives ``NotKnown``."""

    max_steps: int = 200_000
    """Work units per evaluation: one per expression node, per element iterated or
    measured, and per 64 characters/bytes allocated. Bounds total time: a hostile
    expression that exhausts it costs about 0.2 s; ordinary arguments take microseconds."""
    max_str_len: int = 1_000_000
    """Longest ``str`` any operand or result may be (also bounds format widths)."""
    max_bytes_len: int = 1_000_000
    """Longest ``bytes`` any operand or result may be."""
    max_int_bits: int = 8_192
    """Largest ``int`` (bit length), far below CPython's 4300-digit str conversion limit."""
    max_container_len: int = 10_000
    """Most elements in one container, and most items one iteration may produce."""
    max_value_size: int = 4_000_000
    """Largest logical size of a value (nodes plus characters, shared parts counted each
    time they occur): bounds comparison, hashing, ``repr`` and copying."""
    max_depth: int = 200
    """Deepest expression nesting evaluated (recursion bound; deeper gives NotKnown). A
    chain ``a + b + ... + z`` nests one level per operator."""


DEFAULT_LIMITS = Limits()

NoneType = type(None)
ViewTypes: tuple[type, ...] = (type({}.keys()), type({}.values()), type({}.items()))
_SCALARS = frozenset({NoneType, bool, int, float, str, bytes})
_CONTAINERS = frozenset({tuple, list, dict, set, frozenset})
NUMBERS = frozenset({bool, int, float})


class Lazy:
    """A one-shot iterator (generator expression, ``zip``, ``map``, ...) already drained.

    It exists only inside one expression: the evaluator refuses to return it, because a
    Python iterator is stateful and a stored copy would not behave like the real one.
    """

    __slots__ = ("items",)

    def __init__(self, items: list[object]) -> None:
        self.items = items  # materialized, bounded by max_container_len


class Closure:
    """A ``lambda`` evaluated in place: callable as a key, map or filter function.

    Like ``Lazy`` it never outlives its expression (it is neither stored nor returned), so
    CPython's late binding of the names it reads cannot show.
    """

    __slots__ = ("call",)

    def __init__(self, call: Callable[[tuple[Any, ...], dict[str, Any]], object]) -> None:
        self.call = call  # (args, kwargs) -> value of the body, evaluated by the evaluator


@dataclass(frozen=True, slots=True)
class BuiltinRef:
    """A reference to a whitelisted builtin by name (usable as callee, key or map function)."""

    name: str


class Budget:
    """The per-evaluation meter: steps spent and the sizes of values already measured."""

    __slots__ = ("_sizes", "limits", "steps")

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.steps = 0
        # id -> (value, size, holds a NaN); holding the value keeps the id from being reused.
        self._sizes: dict[int, tuple[object, int, bool]] = {}

    def charge(self, n: int = 1) -> None:
        """Spend ``n`` steps; NotKnown once the budget is exhausted."""
        self.steps += n
        if self.steps > self.limits.max_steps:
            raise NotKnown("step budget exhausted")

    def size(self, value: Any) -> int:
        """Logical size of a plain value, checking every type and bound on the way.

        Raises NotKnown for anything that is not exactly a plain type (an internal iterator,
        a builtin reference, a subclass) or that exceeds a limit.
        """
        return self._measure(value, 0)[0]

    def nan_free(self, *values: Any) -> None:
        """Refuse values holding a NaN where CPython would compare by identity.

        Container equality, ``in``, ``index``/``count`` and dict/set lookups treat ``x is y``
        as equal before trying ``==``, and a NaN is never ``==`` to itself. Whether two
        NaNs are the same object depends on how CPython folded and shared constants, which
        the Host cannot see, so such results are not computed.
        """
        for value in values:
            if self._measure(value, 0)[1]:
                raise NotKnown("NaN compared where identity decides")

    def comparable(self, value: Any) -> None:
        """Measure an operand of ``<``/``==``: containers with a NaN are refused (see above)."""
        if type(value) in _CONTAINERS:
            self.nan_free(value)
        else:
            self.size(value)

    def _measure(self, value: Any, depth: int) -> tuple[int, bool]:
        lim = self.limits
        t = type(value)
        if t is str:
            if len(value) > lim.max_str_len:
                raise NotKnown("string too long")
            return len(value) + 1, False
        if t is bytes:
            if len(value) > lim.max_bytes_len:
                raise NotKnown("bytes too long")
            return len(value) + 1, False
        if t is int:
            bits = value.bit_length()
            if bits > lim.max_int_bits:
                raise NotKnown("integer too large")
            return bits // 3 + 2, False
        if t is float:
            return 4, value != value
        if t is bool or t is NoneType:
            return 4, False
        if t is range:
            for bound in (value.start, value.stop, value.step):
                self._measure(bound, depth)
            return 8, False
        if t not in _CONTAINERS:
            raise NotKnown(f"not a plain value: {t.__name__}")
        if depth >= MAX_DEPTH:
            raise NotKnown("value nested too deeply")
        hit = self._sizes.get(id(value))
        if hit is not None and hit[0] is value:
            return hit[1], hit[2]
        n = len(value)
        if n > lim.max_container_len:
            raise NotKnown("container too long")
        self.charge(n + 1)
        total = 2
        nan = False
        parts = (x for kv in value.items() for x in kv) if t is dict else value
        for item in parts:
            item_size, item_nan = self._measure(item, depth + 1)
            total += item_size + 1
            nan = nan or item_nan
            if total > lim.max_value_size:
                raise NotKnown("value too large")
        self._sizes[id(value)] = (value, total, nan)
        return total, nan

    def printable(self, value: Any) -> None:
        """Refuse to turn ``value`` into text if it is too long or shows a set's order.

        ``repr`` lists a set in table order, which depends on hashes (``str`` hashes differ
        from process to process, a NaN's hash is its address) and on the set's history, so
        only sets of at most one element print the same in the Guest.
        """
        if self.size(value) > self.limits.max_str_len:
            raise NotKnown("text form too long")
        stack = [value]
        while stack:
            v = stack.pop()
            t = type(v)
            if t is set or t is frozenset:
                if len(v) > 1:
                    raise NotKnown("set order shows in its text form")
                stack.extend(v)
            elif t is tuple or t is list:
                self.charge(len(v))
                stack.extend(v)
            elif t is dict:
                self.charge(len(v))
                stack.extend(v.keys())
                stack.extend(v.values())

    def check(self, value: Any) -> object:
        """Shallow bounds on a freshly computed value; charges its allocation. Returns it."""
        lim = self.limits
        t = type(value)
        if t is str or t is bytes:
            n = len(value)
            if n > (lim.max_str_len if t is str else lim.max_bytes_len):
                raise NotKnown("result too long")
            self.charge(n // 64)
        elif t is int:
            if value.bit_length() > lim.max_int_bits:
                raise NotKnown("integer too large")
        elif t in _CONTAINERS:
            n = len(value)
            if n > lim.max_container_len:
                raise NotKnown("container too long")
            self.charge(n)
        return value

    def items(
        self, value: Any, *, order_free: bool = False
    ) -> list[object] | tuple[Any, ...] | range:
        """The elements iterating ``value`` yields, bounded; NotKnown if not iterable here.

        ``order_free``: the consumer's result cannot depend on iteration order. Only then is
        a set of more than one element iterated: its order depends on hashes (``str``
        hashes differ per process, a NaN's hash is its address) and on its history.
        """
        lim = self.limits
        t = type(value)
        if t is Lazy:
            return value.items
        if t in (list, tuple):
            self.charge(len(value))
            return value
        if t is range:
            n = len(value)  # OverflowError for huge ranges -> NotKnown
            if n > lim.max_container_len:
                raise NotKnown("range too long to iterate")
            self.charge(n)
            return value
        if t in (str, bytes, dict) or t in ViewTypes:
            n = len(value)
            if n > lim.max_container_len:
                raise NotKnown("too many items to iterate")
            self.charge(n)
            return list(value)
        if t is set or t is frozenset:
            if len(value) > 1 and not order_free:
                raise NotKnown("set iteration order differs between processes")
            self.charge(len(value))
            return list(value)
        raise NotKnown(f"cannot iterate {t.__name__}")


def sortable(value: Any) -> bool:
    """True unless ``value`` is a set whose sorted order could depend on its iteration order."""
    return type(value) not in (set, frozenset) or totally_ordered(value)


def totally_ordered(values: Any) -> bool:
    """True when sorting these distinct elements has exactly one answer."""
    types = {type(v) for v in values}
    if types <= {str} or types <= {bytes}:
        return True
    if types <= NUMBERS:
        return not any(type(v) is float and math.isnan(v) for v in values)
    return False


def truth(value: Any) -> bool:
    """Truthiness as CPython computes it, for every value the evaluator handles."""
    t = type(value)
    if t is Lazy or t is BuiltinRef or t is Closure:
        return True  # iterator objects and functions are always true
    if t in _SCALARS or t in _CONTAINERS or t is range or t in ViewTypes:
        return bool(value)
    raise NotKnown(f"unsupported value {t.__name__}")


_SPEC_NUMBER = re.compile(r"\d+")


def spec_width(spec: object, limits: Limits) -> int:
    """The total of the widths/precisions in a format spec; NotKnown if any is huge."""
    if type(spec) is not str:
        raise NotKnown("format spec is not a str")
    if spec.endswith("n"):
        raise NotKnown("the 'n' format follows the process locale")
    total = 0
    for digits in _SPEC_NUMBER.findall(spec):
        if len(digits) > 9:
            raise NotKnown("format width too large")
        total += int(digits)
    if total > limits.max_str_len:
        raise NotKnown("format width too large")
    return total


def check_format_spec(spec: object, limits: Limits) -> None:
    """Refuse a format spec whose width or precision would build an oversized string."""
    spec_width(spec, limits)


def percent_format_cost(fmt: str | bytes, limits: Limits) -> tuple[int, int]:
    """(total of widths and precisions, number of conversions) of a ``%``-format.

    Mirrors CPython's own scan (``unicode_format_arg_parse``): a ``(key)`` may nest
    parentheses, then flags, width, ``.precision``, and one more character. A ``*`` width
    comes from the arguments and is refused.
    """
    text = fmt.decode("latin-1") if type(fmt) is bytes else fmt
    assert isinstance(text, str)
    n = len(text)
    total = specs = 0
    i = text.find("%")
    while i >= 0:
        i += 1
        specs += 1
        if i < n and text[i] == "(":
            depth = 1
            i += 1
            while i < n and depth:
                depth += (text[i] == "(") - (text[i] == ")")
                i += 1
        while i < n and text[i] in "-+ #0":
            i += 1
        for is_precision in (False, True):
            if is_precision:
                if i >= n or text[i] != ".":
                    break
                i += 1
            if i < n and text[i] == "*":
                raise NotKnown("'*' width in % format")
            start = i
            while i < n and "0" <= text[i] <= "9":
                i += 1
            if i - start > 9:
                raise NotKnown("format width too large")
            total += int(text[start:i] or 0)
        if total > limits.max_str_len:
            raise NotKnown("format width too large")
        i = text.find("%", i + 1)
    return total, specs


# --- builtins -----------------------------------------------------------------------------
#
# Each handler receives (budget, args, kwargs) with every argument already evaluated, and
# returns the value CPython's builtin returns. Arguments that are not plain are refused
# before the real builtin sees them, so no internal object can leak into a real call.

Handler = Callable[[Budget, tuple[Any, ...], dict[str, Any]], object]
BUILTINS: dict[str, Handler] = {}

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


def _plain_args(b: Budget, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    for a in args:
        b.size(a)
    for a in kwargs.values():
        b.size(a)


def _no_kwargs(kwargs: dict[str, Any]) -> None:
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
        _plain_args(b, args, kwargs)
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
    _no_kwargs(kwargs)
    return tuple(*(b.items(a) for a in args))


@_builtin("list")
def _list(b: Budget, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    _no_kwargs(kwargs)
    return list(*(b.items(a) for a in args))


@_builtin("set")
def _set(b: Budget, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    _no_kwargs(kwargs)
    items = [b.items(a, order_free=True) for a in args]
    for group in items:
        for x in group:
            b.nan_free(x)
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
            out = dict(pairs)  # type: ignore[arg-type]
    for k, v in kwargs.items():
        b.size(v)
        out[k] = v
    return out


@_builtin("str")
def _str(b: Budget, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    _no_kwargs(kwargs)
    if len(args) > 1:
        raise NotKnown("str() decoding form is not evaluated")
    if not args:
        return ""
    b.printable(args[0])
    return str(args[0])


def _text_form(name: str, fn: Callable[[object], str]) -> None:
    def handler(b: Budget, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
        _no_kwargs(kwargs)
        (value,) = args
        b.printable(value)
        return fn(value)

    BUILTINS[name] = handler


_text_form("repr", repr)
_text_form("ascii", ascii)


@_builtin("format")
def _format(b: Budget, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    _no_kwargs(kwargs)
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
    _plain_args(b, args, kwargs)
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
    _plain_args(b, args, kwargs)
    _refuse_long_numeral(args)
    return float(*args, **kwargs)


@_builtin("len")
def _len(b: Budget, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    _no_kwargs(kwargs)
    (x,) = args
    if type(x) is Lazy or type(x) is BuiltinRef:
        raise NotKnown("len() of an object without a length")
    return len(x)


@_builtin("range")
def _range(b: Budget, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    _no_kwargs(kwargs)
    for a in args:
        if type(a) not in (int, bool):
            raise NotKnown("range() of a non-integer")
        b.size(a)
    return range(*args)


def _check_power(b: Budget, base: Any, exp: Any) -> None:
    """Refuse ``base ** exp`` (ints) whose result would exceed the int bound."""
    if type(base) in (int, bool) and type(exp) in (int, bool) and exp >= 0 and abs(base) > 1:
        limit = b.limits.max_int_bits
        if exp > limit or (base.bit_length() - 1) * exp > limit:
            raise NotKnown("power too large")


@_builtin("pow")
def _pow(b: Budget, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    _plain_args(b, args, kwargs)
    if kwargs or not 2 <= len(args) <= 3:
        raise NotKnown("pow() arguments not evaluated")
    if len(args) == 2:
        _check_power(b, args[0], args[1])
        return pow(args[0], args[1])
    return pow(*args)


@_builtin("round")
def _round(b: Budget, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    _plain_args(b, args, kwargs)
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
    _no_kwargs(kwargs)
    (iterable,) = args
    return any(truth(x) for x in b.items(iterable, order_free=True))


@_builtin("all")
def _all(b: Budget, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    _no_kwargs(kwargs)
    (iterable,) = args
    return all(truth(x) for x in b.items(iterable, order_free=True))


@_builtin("reversed")
def _reversed(b: Budget, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    _no_kwargs(kwargs)
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
    _no_kwargs(kwargs)
    if len(args) < 2:
        raise NotKnown("map() needs a function and an iterable")
    fn, *iterables = args
    columns = [b.items(a) for a in iterables]
    return Lazy([_apply(b, fn, *row) for row in zip(*columns, strict=False)])


@_builtin("filter")
def _filter(b: Budget, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    _no_kwargs(kwargs)
    fn, iterable = args
    items = b.items(iterable)
    if fn is None:
        return Lazy([x for x in items if truth(x)])
    return Lazy([x for x in items if truth(_apply(b, fn, x))])


@_builtin("isinstance")
def _isinstance(b: Budget, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    _no_kwargs(kwargs)
    value, spec = args
    b.size(value)
    refs = spec if type(spec) is tuple else (spec,)
    types: list[type] = []
    for ref in refs:
        if type(ref) is not BuiltinRef or ref.name not in TYPE_NAMES:
            raise NotKnown("isinstance() against something other than a builtin type")
        types.append(TYPE_NAMES[ref.name])
    return isinstance(value, tuple(types))


# --- methods ------------------------------------------------------------------------------
#
# (exact receiver type, method name) -> handler(budget, receiver, args, kwargs). The
# receiver's type is checked exactly by the caller, so the real method is the one CPython
# would call.

MethodHandler = Callable[[Budget, object, tuple[Any, ...], dict[str, Any]], object]
METHODS: dict[tuple[type, str], MethodHandler] = {}

_LINEAR_STR = [
    "capitalize", "casefold", "lower", "upper", "swapcase", "title", "strip", "lstrip",
    "rstrip", "partition", "rpartition", "startswith", "endswith", "find", "rfind", "index",
    "rindex", "count", "isalnum", "isalpha", "isascii", "isdecimal", "isdigit",
    "isidentifier", "islower", "isnumeric", "isprintable", "isspace", "istitle", "isupper",
    "removeprefix", "removesuffix",
]  # fmt: skip
_LINEAR_BYTES = [
    "capitalize", "lower", "upper", "swapcase", "title", "strip", "lstrip", "rstrip",
    "partition", "rpartition", "startswith", "endswith", "find", "rfind", "index", "rindex",
    "count", "isalnum", "isalpha", "isascii", "isdigit", "islower", "isspace", "istitle",
    "isupper", "removeprefix", "removesuffix", "hex",
]  # fmt: skip
_ENCODINGS = frozenset({"utf-8", "utf8", "ascii", "latin-1", "latin1"})
_ERRORS = frozenset({"strict", "ignore", "replace"})
"""Codecs with a built-in fast path: no codec-registry lookup, no import in the Host."""


def call_method(
    b: Budget, receiver: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> object:
    """Call the whitelisted method ``name`` of ``receiver``; NotKnown otherwise."""
    handler = METHODS.get((type(receiver), name))
    if handler is None:
        raise NotKnown(f"{type(receiver).__name__}.{name} is not whitelisted")
    if name != "join":  # join takes an iterable, which may be an internal iterator
        _plain_args(b, args, kwargs)
    return b.check(handler(b, receiver, args, kwargs))


def _linear(owner: type, name: str) -> None:
    method = getattr(owner, name)

    def handler(b: Budget, receiver: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
        return method(receiver, *args, **kwargs)

    METHODS[(owner, name)] = handler


for _n in _LINEAR_STR:
    _linear(str, _n)
for _n in _LINEAR_BYTES:
    _linear(bytes, _n)
for _owner, _names in ((list, ("copy",)), (dict, ("keys", "values", "items", "copy")),
                       (int, ("bit_length", "bit_count")), (bool, ("bit_length", "bit_count")),
                       (float, ("is_integer", "hex"))):  # fmt: skip
    for _n in _names:
        _linear(_owner, _n)
del _owner, _names, _n


def _by_identity(owner: type, name: str) -> None:
    """Methods that find elements with ``is``-then-``==`` (see ``Budget.nan_free``)."""
    method = getattr(owner, name)

    def handler(b: Budget, receiver: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
        b.nan_free(receiver, *args)
        return method(receiver, *args, **kwargs)

    METHODS[(owner, name)] = handler


_IDENTITY_METHODS: tuple[tuple[type, str], ...] = (
    (list, "index"),
    (list, "count"),
    (tuple, "index"),
    (tuple, "count"),
    (dict, "get"),
)
for _container_type, _name in _IDENTITY_METHODS:
    _by_identity(_container_type, _name)
del _container_type, _name


def _max_len(b: Budget, receiver: Any) -> int:
    return b.limits.max_str_len if type(receiver) is str else b.limits.max_bytes_len


def _padded(owner: type, name: str) -> None:
    method = getattr(owner, name)

    def handler(b: Budget, receiver: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
        if args and type(args[0]) in (int, bool) and args[0] > _max_len(b, receiver):
            raise NotKnown("padding width too large")
        return method(receiver, *args, **kwargs)

    METHODS[(owner, name)] = handler


for _text_type in (str, bytes):
    for _n in ("center", "ljust", "rjust", "zfill"):
        _padded(_text_type, _n)
del _text_type, _n


def _replace(b: Budget, receiver: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    if kwargs or not 2 <= len(args) <= 3 or any(type(a) is not type(receiver) for a in args[:2]):
        raise NotKnown("replace() arguments")
    old, new = args[0], args[1]
    count = args[2] if len(args) == 3 else -1
    if type(count) not in (int, bool):
        raise NotKnown("replace() count is not an int")
    n = len(receiver) + 1 if not old else receiver.count(old)
    if count >= 0:
        n = min(n, count)
    if len(receiver) + n * (len(new) - len(old)) > _max_len(b, receiver):
        raise NotKnown("replace() result too long")
    return receiver.replace(old, new, count)


def _expandtabs(b: Budget, receiver: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    size = kwargs.get("tabsize", args[0] if args else 8)
    if type(size) not in (int, bool):
        raise NotKnown("expandtabs() tabsize is not an int")
    tab = "\t" if type(receiver) is str else b"\t"
    if len(receiver) + receiver.count(tab) * max(size, 0) > _max_len(b, receiver):
        raise NotKnown("expandtabs() result too long")
    return receiver.expandtabs(*args, **kwargs)


def _join(b: Budget, receiver: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    _no_kwargs(kwargs)
    (iterable,) = args
    parts: Any = b.items(iterable)
    if any(type(p) is not type(receiver) for p in parts):
        raise NotKnown("join() of non-string items")
    total: int = sum(len(p) for p in parts) + len(receiver) * max(len(parts) - 1, 0)
    if total > _max_len(b, receiver):
        raise NotKnown("join() result too long")
    return receiver.join(parts)


def _split(method_name: str) -> MethodHandler:
    def handler(b: Budget, receiver: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
        if len(args) > 2 or set(kwargs) - {"sep", "maxsplit"}:
            raise NotKnown(f"{method_name}() arguments")
        sep = kwargs.get("sep", args[0] if args else None)
        maxsplit = kwargs.get("maxsplit", args[1] if len(args) > 1 else -1)
        if type(maxsplit) not in (int, bool):
            raise NotKnown(f"{method_name}() maxsplit is not an int")
        # Split at most `cap` times: fewer parts than that means the split was complete,
        # so the result equals the unbounded one without ever building a huge list.
        cap = b.limits.max_container_len - 1
        bounded = maxsplit < 0 or maxsplit > cap
        parts = getattr(receiver, method_name)(sep, cap if bounded else maxsplit)
        if bounded and len(parts) > cap:
            raise NotKnown(f"{method_name}() gives too many parts")
        return parts

    return handler


_LINE_BREAKS: dict[type, Any] = {str: "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029", bytes: b"\n\r"}


def _splitlines(b: Budget, receiver: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    breaks = _LINE_BREAKS[type(receiver)]
    if (
        sum(receiver.count(breaks[i : i + 1]) for i in range(len(breaks)))
        >= b.limits.max_container_len
    ):
        raise NotKnown("splitlines() gives too many lines")
    return receiver.splitlines(*args, **kwargs)


_FORMATTER = string.Formatter()  # its parse() is str.format's own C parser


def _str_format(b: Budget, receiver: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    """``str.format`` with plain field names only: ``{0.attr}`` and ``{0[k]}`` walk objects."""
    widths = fields = 0
    for _literal, field, spec, _conversion in _FORMATTER.parse(receiver):
        if field is None:
            continue
        if not (field == "" or (field.isascii() and field.isdigit()) or field.isidentifier()):
            raise NotKnown("format field with attribute or item access")
        if "{" in (spec or "") or "}" in (spec or ""):
            raise NotKnown("nested replacement field in a format spec")
        widths += spec_width(spec, b.limits)
        fields += 1
    largest = max((b.size(a) for a in (*args, *kwargs.values())), default=0)
    for a in (*args, *kwargs.values()):
        b.printable(a)
    if len(receiver) + widths + fields * largest > b.limits.max_str_len:
        raise NotKnown("format() result too long")
    return receiver.format(*args, **kwargs)


def _codec(method_name: str) -> MethodHandler:
    def handler(b: Budget, receiver: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
        if set(kwargs) - {"encoding", "errors"} or len(args) > 2:
            raise NotKnown(f"{method_name}() arguments")
        encoding = kwargs.get("encoding", args[0] if args else "utf-8")
        errors = kwargs.get("errors", args[1] if len(args) > 1 else "strict")
        if encoding not in _ENCODINGS or errors not in _ERRORS:
            raise NotKnown(f"{method_name}() with codec {encoding!r}/{errors!r} is not evaluated")
        return getattr(receiver, method_name)(encoding, errors)

    return handler


for _text_type in (str, bytes):
    METHODS[(_text_type, "replace")] = _replace
    METHODS[(_text_type, "expandtabs")] = _expandtabs
    METHODS[(_text_type, "join")] = _join
    METHODS[(_text_type, "split")] = _split("split")
    METHODS[(_text_type, "rsplit")] = _split("rsplit")
    METHODS[(_text_type, "splitlines")] = _splitlines
del _text_type
METHODS[(str, "format")] = _str_format
METHODS[(str, "encode")] = _codec("encode")
METHODS[(bytes, "decode")] = _codec("decode")


# --- operators ----------------------------------------------------------------------------

BINARY: dict[str, Callable[[object, object], object]] = {
    "Add": operator.add, "Sub": operator.sub, "Mult": operator.mul,
    "Div": operator.truediv, "FloorDiv": operator.floordiv, "Mod": operator.mod,
    "Pow": operator.pow, "LShift": operator.lshift, "RShift": operator.rshift,
    "BitOr": operator.or_, "BitXor": operator.xor, "BitAnd": operator.and_,
}  # fmt: skip
_SEQUENCES = (str, bytes, tuple, list)
_INTS = (int, bool)


def _operand(value: Any) -> type:
    t = type(value)
    if t is Lazy or t is BuiltinRef or t is Closure or t in ViewTypes:
        raise NotKnown(f"operator on {t.__name__}")
    return t


def _seq_limit(b: Budget, t: type) -> int:
    if t is str:
        return b.limits.max_str_len
    if t is bytes:
        return b.limits.max_bytes_len
    return b.limits.max_container_len


def binary(b: Budget, op: str, x: Any, y: Any) -> object:
    """``x <op> y`` as CPython computes it, refused first if the result would be too big."""
    fn = BINARY.get(op)
    if fn is None:
        raise NotKnown(f"operator {op} is not evaluated")
    tx, ty = _operand(x), _operand(y)
    lim = b.limits
    if op == "Add" and tx is ty and tx in _SEQUENCES:
        if len(x) + len(y) > _seq_limit(b, tx):
            raise NotKnown("concatenation too long")
    elif op == "Mult":
        if tx in _SEQUENCES and ty in _INTS:
            if y > 0 and len(x) * y > _seq_limit(b, tx):
                raise NotKnown("repetition too long")
        elif ty in _SEQUENCES and tx in _INTS:
            if x > 0 and len(y) * x > _seq_limit(b, ty):
                raise NotKnown("repetition too long")
        elif tx in _INTS and ty in _INTS and x.bit_length() + y.bit_length() > lim.max_int_bits + 1:
            raise NotKnown("product too large")
    elif op == "Pow":
        _check_power(b, x, y)
    elif op == "LShift":
        if (
            tx in _INTS
            and ty in _INTS
            and x
            and y > 0
            and (y > lim.max_int_bits or x.bit_length() + y > lim.max_int_bits)
        ):
            raise NotKnown("shift too large")
    elif op == "Mod" and tx in (str, bytes):
        widths, specs = percent_format_cost(x, lim)
        b.printable(y)
        # A mapping can be named by every conversion; a tuple's items are used once each.
        repeats = specs if type(y) is dict else 1
        if len(x) + widths + repeats * b.size(y) > _seq_limit(b, tx):
            raise NotKnown("%-format result too long")
    elif tx in _CONTAINERS or ty in _CONTAINERS:
        b.nan_free(x, y)
    return b.check(fn(x, y))


def unary(b: Budget, op: str, x: Any) -> object:
    """``<op> x`` for ``not``, ``-``, ``+`` and ``~``."""
    if op == "Not":
        return not truth(x)
    if type(x) not in NUMBERS:
        raise NotKnown(f"unary {op} on a non-number")
    if op == "USub":
        return b.check(-x)
    if op == "UAdd":
        return +x
    if op == "Invert":
        return b.check(~x)
    raise NotKnown(f"unary operator {op} is not evaluated")


COMPARE: dict[str, Callable[[Any, Any], object]] = {
    "Eq": operator.eq, "NotEq": operator.ne, "Lt": operator.lt, "LtE": operator.le,
    "Gt": operator.gt, "GtE": operator.ge,
}  # fmt: skip
_SINGLETONS = (None, True, False)


def compare(b: Budget, op: str, x: Any, y: Any) -> bool:
    """One link of a comparison chain, as CPython computes it."""
    if op in ("Is", "IsNot"):
        # Identity is only exact against singletons; `a is b` for other values depends
        # on interning and caching that may differ between processes.
        if not any(x is s or y is s for s in _SINGLETONS):
            raise NotKnown("identity comparison of non-singletons")
        return (x is y) == (op == "Is")
    if op in ("In", "NotIn"):
        ty = type(y)
        if ty in _SCALARS or ty is range:
            b.size(x)  # substring test, or arithmetic on a range: no identity involved
        else:
            b.nan_free(x, *(y.items if ty is Lazy else list(y) if ty in ViewTypes else (y,)))
        found = x in (y.items if ty is Lazy else y)
        return bool(found) == (op == "In")
    fn = COMPARE.get(op)
    if fn is None:
        raise NotKnown(f"comparison {op} is not evaluated")
    _operand(x)
    _operand(y)
    b.comparable(x)
    b.comparable(y)
    result = fn(x, y)
    if type(result) is not bool:
        raise NotKnown("comparison did not give a bool")
    return result
