"""Rich values: what tools commonly return, turned into the plain data the program sees.

Only plain data crosses the broker (``occurrences.plain``). Tools written for other
frameworks return pydantic models, dataclasses, datetimes, ``Decimal``, ``UUID``, enums,
sets; refusing them all would make every such tool need a wrapper. ``to_plain`` converts a
tool's result once, in the Host, on the one path both lanes share (``_broker.execute``,
before the crossing check), so an early result and the program's own call of the same
tool convert identically and the contract holds. The rules (docs/tools.md, "Values"):

- plain values are kept as they are (exact types); ``list``/``tuple``/``dict`` are
  converted item by item, keeping their type (dict keys too);
- a pydantic model → ``model_dump()`` (its fields by name, its serializers apply), then
  converted; a dataclass instance → ``{field name: value}`` in field order;
- ``datetime``/``date``/``time`` → ``isoformat()``; ``timedelta`` → ``total_seconds()``;
  ``Decimal`` → ``str`` (exact); ``UUID`` and paths → ``str``; an enum member → its
  ``value``, converted;
- ``set``/``frozenset`` → a ``list``, sorted, so that equal sets always give the same list
  (hash order differs between equal sets): by value when the items are all ``str``, all
  ``bytes`` or all numbers, otherwise by their encoded form;
- ``bytearray``/``memoryview`` → ``bytes``; a subclass of a plain type (a ``str``
  subclass, a ``NamedTuple``, an ``OrderedDict``) → that plain type, without calling any
  method it overrides;
- anything else is left as it is, and the crossing check then refuses it (a
  ``ToolError`` ``InvalidResult`` in the program).

A Host may add its own rules: ``Host(encode=fn)``. ``fn(value)`` is asked first about every
value that is not of an exact plain type, and returns its replacement (converted again,
so it may contain rich values) or ``NotImplemented`` for the built-in rules. A conversion
that raises is a failure of the call (``ToolError`` ``InvalidResult``), the same in both
lanes. Conversion depth is bounded by ``occurrences.plain.MAX_DEPTH`` (a deeper or
cyclic value is left for the crossing check to refuse).

Prior art: Pydantic AI code mode gives the program a JSON shape (``to_jsonable_python``);
these rules give the same strings for datetimes, decimals and UUIDs, but keep what plain
data can say and JSON cannot (``bytes``, tuples, non-str keys).
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import math
import os
import pathlib
import uuid
from collections.abc import Callable

import pydantic

from occurrences.plain import MAX_DEPTH, NotPlain, dumps

Encoder = Callable[[object], object]
"""A Host's own conversion: ``fn(value)`` → replacement, or ``NotImplemented``."""

_SCALARS = (type(None), bool, int, float, str, bytes)


class ConversionError(Exception):
    """A conversion rule (a model's serializer, a Host encoder) raised."""


def to_plain(value: object, encode: Encoder | None = None) -> object:
    """``value`` with every rich part converted by the rules above (see module docstring).

    Values of exact plain types are returned as they are (the caller copies). Raises
    ``ConversionError`` when a rule raises; never raises for a value no rule knows (it is
    left in place).
    """
    try:
        return _convert(value, encode, 0)
    except ConversionError:
        raise
    except Exception as exc:
        raise ConversionError(f"{type(exc).__name__}: {exc}") from exc


def _convert(value: object, encode: Encoder | None, depth: int) -> object:
    t = type(value)
    if t in _SCALARS:
        return value
    if depth > MAX_DEPTH:
        return value  # refused by the crossing check ("nested deeper than ...")
    d = depth + 1
    # Plain containers are rebuilt only when an item changed (results can be megabytes).
    if t is list or t is tuple:
        assert isinstance(value, list | tuple)
        items = [_convert(v, encode, d) for v in value]
        if all(a is b for a, b in zip(items, value, strict=True)):
            return value
        return items if t is list else tuple(items)
    if t is dict:
        assert isinstance(value, dict)
        pairs = [(_convert(k, encode, d), _convert(v, encode, d)) for k, v in value.items()]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(pairs, value.items(), strict=True)):
            return value
        return dict(pairs)
    if encode is not None:
        try:
            replaced = encode(value)
        except Exception as exc:
            raise ConversionError(f"the Host's encoder raised {type(exc).__name__}: {exc}") from exc
        if replaced is not NotImplemented:
            return _convert(replaced, encode, d)
    return _builtin(value, encode, d)


def _builtin(value: object, encode: Encoder | None, d: int) -> object:
    """The built-in rules for a value that is not of an exact plain type."""
    if isinstance(value, pydantic.BaseModel):
        return _convert(value.model_dump(), encode, d)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: _convert(getattr(value, f.name), encode, d) for f in dataclasses.fields(value)
        }
    if isinstance(value, enum.Enum):
        return _convert(value.value, encode, d)
    if isinstance(value, datetime.date | datetime.time):  # datetime is a date
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, uuid.UUID | pathlib.PurePath):
        return str(value) if isinstance(value, uuid.UUID) else os.fspath(value)
    if isinstance(value, set | frozenset):
        return _sorted([_convert(v, encode, d) for v in value])
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    # Subclasses of plain types (bool has none), read through the base type's own slots.
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, bytes):
        return bytes.__bytes__(value)
    if isinstance(value, tuple):
        return tuple(_convert(v, encode, d) for v in tuple.__iter__(value))
    if isinstance(value, list):
        return [_convert(v, encode, d) for v in list.__iter__(value)]
    if isinstance(value, dict):
        return {_convert(k, encode, d): _convert(v, encode, d) for k, v in dict.items(value)}
    return value


def _sorted(items: list[object]) -> list[object]:
    """A deterministic order for the items of a set (see the module docstring)."""
    kinds = {type(v) for v in items}
    if len(kinds) <= 1 and kinds <= {str, bytes}:
        return sorted(items)  # type: ignore[type-var]
    if kinds <= {int, float} and not any(isinstance(v, float) and math.isnan(v) for v in items):
        return sorted(items)  # type: ignore[type-var]
    try:
        return sorted(items, key=dumps)
    except NotPlain:
        return items  # something no rule knows: the crossing check refuses the result
