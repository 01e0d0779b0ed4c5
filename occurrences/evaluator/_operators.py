"""Binary, unary and comparison operators on plain values, as CPython computes them.

The operator is CPython's own (``operator.add``, ...), applied only to exact plain types
(an internal iterator, builtin reference or closure is refused: ``_operand``). Operators
that can amplify (``*`` repetition, ``**``, ``<<``, ``%``-formatting, concatenation) are
refused first when the result would exceed a bound; container equality and ``in`` refuse
a NaN, where CPython's answer depends on object identity; ``is`` is only exact against
``None``, ``True`` and ``False``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from .._exceptions import NotKnown
from ._budget import (
    CONTAINERS,
    NUMBERS,
    SCALARS,
    Budget,
    BuiltinRef,
    Closure,
    Lazy,
    ViewTypes,
    truth,
)
from ._sizes import check_power, percent_format_cost

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
        check_power(b, x, y)
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
    elif tx in CONTAINERS or ty in CONTAINERS:
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
        if ty in SCALARS or ty is range:
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
