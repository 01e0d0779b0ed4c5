"""The values the evaluator computes with, its bounds, and the meter that enforces them.

The pure operations (``_builtins``, ``_methods``, ``_operators``) run CPython's own code,
but only on values whose *exact* type is plain (``None``, ``bool``, ``int``, ``float``,
``str``, ``bytes``, ``tuple``, ``list``, ``dict``, plus ``set``, ``frozenset``, ``range``
and dict views as intermediates): a subclass could override an operator, so a subclass is
refused rather than trusted. On such values no operation can reach user code. This module
holds what they all share: ``Limits``, the per-evaluation ``Budget``, the internal values
(``Lazy``, ``Closure``, ``BuiltinRef``) and truthiness.

Bounds come *before* work. An operation that can amplify its inputs (repetition, ``**``,
``<<``, padding widths, ``join``, ``replace``, ``%``-formatting, materializing a ``range``)
estimates its result size first (``_sizes``) and refuses (``NotKnown``) when it would
exceed a limit.
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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._exceptions import NotKnown
from ..plain import MAX_DEPTH, MAX_EQUAL_HASHES, check_keys


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
SCALARS = frozenset({NoneType, bool, int, float, str, bytes})
CONTAINERS = frozenset({tuple, list, dict, set, frozenset})
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

    def hashed(self, keys: list[Any]) -> None:
        """Refuse to build a set or dict of ``keys`` when more than ``MAX_EQUAL_HASHES`` of
        them share a hash (``plain.check_keys``): each such key costs CPython a probe of
        every other, so ``{k * (2**61 - 1): 0 for k in range(10_000)}`` would hold the Host
        for seconds. Checked in linear time, before anything is inserted."""
        if len(keys) > MAX_EQUAL_HASHES:
            self.charge(len(keys))
            check_keys(keys)

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
        if type(value) in CONTAINERS:
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
        if t not in CONTAINERS:
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
        if n > MAX_EQUAL_HASHES and t is not tuple and t is not list:
            check_keys(
                value
            )  # made by an operation whose inputs were checked: never past twice the bound
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
        elif t in CONTAINERS:
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
    if t in SCALARS or t in CONTAINERS or t is range or t in ViewTypes:
        return bool(value)
    raise NotKnown(f"unsupported value {t.__name__}")
