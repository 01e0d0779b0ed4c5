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

from ._exceptions import NotKnown

MAX_DEPTH = 64
"""Nesting bound for plain values; deeper values are refused rather than recursed into."""


MAX_INT_DIGITS = 4300
"""Most decimal digits a plain ``int`` may have: CPython's default limit for converting
an int to text, fixed here so every process agrees whatever its own setting."""

INT_BOUND = 10**MAX_INT_DIGITS
"""The ints that cross are those strictly inside ``±INT_BOUND`` (``to_tagged``'s bound)."""


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


def to_tagged(value: object, _depth: int = 0) -> object:
    """The tagged form of a plain value; raises ``NotPlain`` for anything else."""
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
    d = _depth + 1
    if t is tuple:
        assert isinstance(value, tuple)
        return ["t", [to_tagged(v, d) for v in value]]
    if t is list:
        assert isinstance(value, list)
        return ["l", [to_tagged(v, d) for v in value]]
    if t is dict:
        assert isinstance(value, dict)
        # Insertion order is observable (iteration), so it is part of the value.
        return ["d", [[to_tagged(k, d), to_tagged(v, d)] for k, v in value.items()]]
    raise NotPlain(f"not plain data: {t.__qualname__}")


def from_tagged(tagged: object, _depth: int = 0) -> object:
    """Inverse of ``to_tagged``; raises ``ValueError`` on anything it did not produce."""
    if _depth > MAX_DEPTH + 1 or not isinstance(tagged, list) or not tagged:
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
        d = _depth + 1
        if tag == "t" and type(body) is list:
            return tuple(from_tagged(v, d) for v in body)
        if tag == "l" and type(body) is list:
            return [from_tagged(v, d) for v in body]
        if tag == "d" and type(body) is list:
            out = {}
            for pair in body:
                k, v = pair
                out[from_tagged(k, d)] = from_tagged(v, d)
            return out
    except (TypeError, ValueError) as exc:
        raise ValueError(f"malformed plain value: {exc}") from None
    raise ValueError("malformed plain value")


def own(value: object, _depth: int = 0) -> tuple[object, object]:
    """``(fresh_copy(value), to_tagged(value))`` in one walk; raises ``NotPlain`` as ``to_tagged``.

    What the broker does to every argument of a call: check it, take its own copy (the
    tool never shares a container with the program) and tag it (the call key), once.
    Scalars are tagged by ``to_tagged`` itself, so what a scalar may be is decided in one
    place; containers are walked here (shared by nothing, so the copy is just new ones).
    """
    t = type(value)
    if t is tuple or t is list:
        if _depth > MAX_DEPTH:
            raise NotPlain(f"value nested deeper than {MAX_DEPTH}")
        assert isinstance(value, tuple | list)
        d = _depth + 1
        copies, tags = [], []
        for item in value:
            c, g = own(item, d)
            copies.append(c)
            tags.append(g)
        return (tuple(copies), ["t", tags]) if t is tuple else (copies, ["l", tags])
    if t is dict:
        if _depth > MAX_DEPTH:
            raise NotPlain(f"value nested deeper than {MAX_DEPTH}")
        assert isinstance(value, dict)
        d = _depth + 1
        copy, pairs = {}, []
        for k, v in value.items():
            ck, gk = own(k, d)
            cv, gv = own(v, d)
            copy[ck] = cv
            pairs.append([gk, gv])
        return copy, ["d", pairs]
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
