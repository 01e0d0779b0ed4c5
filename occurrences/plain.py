"""Plain data: the only values that cross between Guest, Host and tools.

Plain means ``None``, ``bool``, ``int``, ``float``, ``str``, ``bytes``, and ``tuple``,
``list`` and ``dict`` of plain values (dict keys: hashable plain values). Exact types only:
a subclass could carry behaviour (``__eq__``, ``__hash__``, ``__reduce__``) across.

Plain values must also be able to *cross*: be keyed, hashed, encoded, traced and handed to
any tool identically in every process. So a ``str`` is valid Unicode text (no lone
surrogate: UTF-8 cannot encode one, so hashing, JSON and most tools would fail on it) and
an ``int`` has at most ``MAX_INT_DIGITS`` decimal digits (CPython's default
str-conversion limit; beyond it ``str(n)`` raises). Values of the right type that fail
these rules raise ``Uncrossable`` — a ``NotPlain`` that is also a ``ValueError``.

The wire and key form is *tagged*: every value becomes a small JSON array whose first item
names its type, so ``1``, ``1.0`` and ``True``, or ``(1,)`` and ``[1]``, never collide and
decode back to exactly what was encoded. Floats travel as ``float.hex`` (bit-exact, keeps
``-0.0`` and ``inf``); a NaN, which ``float.hex`` spells ``nan`` whatever its sign and
payload, as ``nan:`` and its 16 hex digits of IEEE 754 bits (``nan:7ff8000000000000`` is
``float("nan")``, ``nan:fff8000000000000`` its negation), so a tool and a call key see
exactly the NaN the program made, in every process (issue 36: ``math.copysign(1, x)``
tells the two apart).
"""

from __future__ import annotations

import json
import struct
import sys
from collections.abc import Iterable

from ._exceptions import NotKnown

MAX_DEPTH = 64
"""Nesting bound for plain values; deeper values are refused rather than recursed into."""


MAX_INT_DIGITS = 4300
"""Most decimal digits a plain ``int`` may have: CPython's default limit for converting
an int to text, fixed here so every process agrees whatever its own setting."""

INT_BOUND = 10**MAX_INT_DIGITS
"""The ints that cross are those strictly inside ``±INT_BOUND`` (``to_tagged``'s bound)."""

MAX_ITEMS = 50_000
"""Most items one list or tuple, or entries one dict, may hold. A value is decoded and
copied item by item, so its collections bound what one call costs the Host."""

MAX_VALUE_ITEMS = 100_000
"""Most items (elements, dict entries) one value may hold in all its collections together:
a call's positional arguments, its keyword arguments, a result, a program's value. A frame
carries at most two values (a call's), so this bounds what one frame costs the Host to
decode, copy and key, in time and memory (docs/tools.md, "Bounds")."""

MAX_EQUAL_HASHES = 32
"""Most keys of one dict that may share a hash. CPython's dict probes every key of equal
hash in turn, so ``n`` such keys cost ``n**2 / 2`` comparisons to insert: ``k * (2**61 -
1)`` are all hash 0, as are many floats and tuples of them. A ``str`` or ``bytes`` key is
not counted while hash randomization is on (the program cannot know its hash); ``-1`` and
``-2`` (both hash ``-2``) show why a few must be allowed."""

_SECRET_HASH = frozenset({str, bytes}) if sys.flags.hash_randomization else frozenset()
"""Key types whose hash the program cannot choose (randomized per process)."""


class NotPlain(NotKnown, TypeError):
    """A value is not plain data (or is nested too deeply)."""


class Uncrossable(NotPlain, ValueError):
    """A value of a plain type that cannot cross: a ``str`` holding a lone surrogate, an
    ``int`` over ``MAX_INT_DIGITS`` digits."""


def _check_text(value: str) -> None:
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise Uncrossable(f"str with a lone surrogate at index {exc.start}") from None


_DOUBLE = struct.Struct(">d")
"""An IEEE 754 binary64, big-endian: a float's bits as 16 hex digits, NaN payloads kept."""


_HEX = frozenset("0123456789abcdef")


def nan_text(value: float) -> str:
    """The tagged body of a NaN: ``nan:`` and its bits (see the module docstring)."""
    return "nan:" + _DOUBLE.pack(value).hex()


def _nan(body: str) -> float:
    """The NaN ``nan_text`` wrote ``body`` for; ``ValueError`` for any other text (a
    non-NaN's bits, a wrong length, upper-case digits: one spelling per value)."""
    bits = body[4:]
    if body[:4] != "nan:" or len(bits) != 16 or not _HEX.issuperset(bits):
        raise ValueError(f"not a tagged NaN: {body[:40]!r}")
    value: float = _DOUBLE.unpack(bytes.fromhex(bits))[0]
    if value == value:
        raise ValueError(f"not a tagged NaN: {body[:40]!r}")
    return value


def to_tagged(value: object, _depth: int = 0, _left: list[int] | None = None) -> object:
    """The tagged form of a plain value; raises ``NotPlain`` for anything else, and
    ``Uncrossable`` for a value past the bounds (``MAX_ITEMS``, ``MAX_VALUE_ITEMS``,
    ``MAX_EQUAL_HASHES``)."""
    if _depth > MAX_DEPTH:
        raise NotPlain(f"value nested deeper than {MAX_DEPTH}")
    t = type(value)
    if value is None:
        return ["n"]
    if t is bool:
        return ["b", value]
    if t is int:
        assert isinstance(value, int)
        if not -INT_BOUND < value < INT_BOUND:
            raise Uncrossable(f"int with more than {MAX_INT_DIGITS} digits")
        return ["i", str(value)]
    if t is float:
        assert isinstance(value, float)
        return ["f", value.hex() if value == value else nan_text(value)]
    if t is str:
        assert isinstance(value, str)
        _check_text(value)
        return ["s", value]
    if t is bytes:
        assert isinstance(value, bytes)
        return ["y", value.hex()]
    if t is not tuple and t is not list and t is not dict:
        raise NotPlain(f"not plain data: {t.__qualname__}")
    assert isinstance(value, tuple | list | dict)
    if _left is None:
        _left = [MAX_VALUE_ITEMS]
    _spend(t, len(value), _left)
    d = _depth + 1
    if t is tuple:
        return ["t", [to_tagged(v, d, _left) for v in value]]
    if t is list:
        return ["l", [to_tagged(v, d, _left) for v in value]]
    assert isinstance(value, dict)
    # Insertion order is observable (iteration), so it is part of the value.
    pairs = [[to_tagged(k, d, _left), to_tagged(v, d, _left)] for k, v in value.items()]
    if len(value) > MAX_EQUAL_HASHES:
        check_keys(value)
    return ["d", pairs]


def _spend(t: type, items: int, left: list[int]) -> None:
    """Charge one collection of ``items`` against ``MAX_ITEMS`` and the value's ``left``."""
    if items > MAX_ITEMS:
        raise Uncrossable(f"{t.__qualname__} of more than {MAX_ITEMS} items")
    left[0] -= items
    if left[0] < 0:
        raise Uncrossable(f"value of more than {MAX_VALUE_ITEMS} items")


def check_keys(keys: Iterable[object]) -> None:
    """Raise ``Uncrossable`` when more than ``MAX_EQUAL_HASHES`` of ``keys`` share one hash.

    Linear: the counts are keyed by the hashes themselves, ints that never collide with
    each other (``hash(h) == h`` for every value ``hash`` returns). A ``str`` or ``bytes``
    key is skipped while hash randomization is on: its hash is secret to the program.
    """
    counts: dict[int, int] = {}
    get = counts.get
    for key in keys:
        if type(key) in _SECRET_HASH:
            continue
        h = hash(key)
        n = get(h, 0) + 1
        if n > MAX_EQUAL_HASHES:
            raise Uncrossable(f"dict with more than {MAX_EQUAL_HASHES} keys of one hash")
        counts[h] = n


def from_tagged(tagged: object, _depth: int = 0, _left: list[int] | None = None) -> object:
    """Inverse of ``to_tagged``; raises ``ValueError`` on anything it did not produce, and
    ``NotPlain`` (``Uncrossable``) where ``to_tagged`` would have refused the value it
    stands for: nested too deeply, past the bounds. Linear in the size of ``tagged``: a
    dict's keys are checked (``check_keys``) before the dict is built."""
    if _depth > MAX_DEPTH:
        raise NotPlain(f"value nested deeper than {MAX_DEPTH}")
    if not isinstance(tagged, list) or not tagged:
        raise ValueError("malformed plain value")
    tag, *rest = tagged
    try:
        if tag == "n" and not rest:
            return None
        (body,) = rest
        if tag == "b" and type(body) is bool:
            return body
        if tag == "i" and type(body) is str:
            return int(body)
        if tag == "f" and type(body) is str:
            return _nan(body) if body.startswith("nan") else float.fromhex(body)
        if tag == "s" and type(body) is str:
            return body
        if tag == "y" and type(body) is str:
            return bytes.fromhex(body)
        if type(body) is list and tag in _CONTAINER_TAGS:
            if _left is None:
                _left = [MAX_VALUE_ITEMS]
            _spend(_CONTAINER_TAGS[tag], len(body), _left)
            d = _depth + 1
            if tag == "t":
                return tuple([from_tagged(v, d, _left) for v in body])
            if tag == "l":
                return [from_tagged(v, d, _left) for v in body]
            pairs = []
            for pair in body:
                k, v = pair
                pairs.append((from_tagged(k, d, _left), from_tagged(v, d, _left)))
            if len(pairs) > MAX_EQUAL_HASHES:
                check_keys([k for k, _ in pairs])
            return dict(pairs)
    except NotPlain:
        raise
    except (
        TypeError,
        ValueError,
        OverflowError,
    ) as exc:  # OverflowError: a float past the double range
        raise ValueError(f"malformed plain value: {exc}") from None
    raise ValueError("malformed plain value")


_CONTAINER_TAGS: dict[object, type] = {"t": tuple, "l": list, "d": dict}


def own(value: object, _depth: int = 0, _left: list[int] | None = None) -> tuple[object, object]:
    """``(fresh_copy(value), to_tagged(value))`` in one walk; raises ``NotPlain`` as ``to_tagged``.

    What the broker does to every argument of a call: check it, take its own copy (the
    tool never shares a container with the program) and tag it (the call key), once.
    Scalars are tagged by ``to_tagged`` itself, so what a scalar may be is decided in one
    place; containers are walked here (shared by nothing, so the copy is just new ones),
    in ``to_tagged``'s order and with its bounds, so both refuse the same first offender.
    """
    t = type(value)
    if t is tuple or t is list:
        if _depth > MAX_DEPTH:
            raise NotPlain(f"value nested deeper than {MAX_DEPTH}")
        assert isinstance(value, tuple | list)
        if _left is None:
            _left = [MAX_VALUE_ITEMS]
        _spend(t, len(value), _left)
        d = _depth + 1
        copies, tags = [], []
        for item in value:
            c, g = own(item, d, _left)
            copies.append(c)
            tags.append(g)
        return (tuple(copies), ["t", tags]) if t is tuple else (copies, ["l", tags])
    if t is dict:
        if _depth > MAX_DEPTH:
            raise NotPlain(f"value nested deeper than {MAX_DEPTH}")
        assert isinstance(value, dict)
        if _left is None:
            _left = [MAX_VALUE_ITEMS]
        _spend(t, len(value), _left)
        d = _depth + 1
        items, pairs = [], []
        for k, v in value.items():
            ck, gk = own(k, d, _left)
            cv, gv = own(v, d, _left)
            items.append((ck, cv))
            pairs.append([gk, gv])
        if len(items) > MAX_EQUAL_HASHES:
            check_keys(value)
        return dict(items), ["d", pairs]
    return value, to_tagged(value, _depth)


ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
"""Built once: ``json.dumps`` with options builds a new encoder per call."""


def dumps(value: object) -> str:
    """Encode a plain value as compact JSON text (deterministic)."""
    return ENCODER.encode(to_tagged(value))


def loads(text: str | bytes) -> object:
    """Decode text made by ``dumps``."""
    return from_tagged(json.loads(text))


def check_plain(value: object) -> None:
    """Raise ``NotPlain`` unless ``value`` is plain data."""
    to_tagged(value)


def fresh_copy(value: object) -> object:
    """A deep copy sharing no mutable container with ``value`` (immutables are shared)."""
    t = type(value)
    if t is list:
        assert isinstance(value, list)
        return [fresh_copy(v) for v in value]
    if t is dict:
        assert isinstance(value, dict)
        return {k: fresh_copy(v) for k, v in value.items()}
    if t is tuple:
        assert isinstance(value, tuple)
        return tuple(fresh_copy(v) for v in value)
    return value
