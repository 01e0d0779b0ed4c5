"""What a session's Guest reports after each turn: the plain-data globals the turn left.

Speculation in the next turn starts from these values (``occurrences.PriorGlobals``): a
``paths`` list built in turn 1 lets turn 2's ``for p in paths: docs.read(p)`` start its
reads while turn 2 still streams. A global that is not plain data (a function, a module, an
object, a capability alias) is reported by name only, as *opaque*: discovery then treats
any use of it as unknown code rather than mistaking it for a builtin.

The report is untrusted (the Guest runs model-written code and can send anything), and it
needs no trust: it only feeds discovery, which may start nothing but ``pure`` and
``immutable_read`` calls, and every claim is still checked by its exact call key. A wrong
report costs wasted early reads, never a different result.

Bounds keep the report cheap for the Guest to build and for the Host to read: at most
``MAX_REPORTED_NAMES`` names, values walked with a node budget, ``MAX_REPORTED_SIZE`` in
all. A value past a bound is reported opaque; names past the count are not reported (a
name not reported is, for discovery, a name the earlier turns did not bind).

Standard library only: the subprocess Guest imports this module without the Host's
dependencies, and the in-process Guest uses the same rules.
"""

from __future__ import annotations

from collections.abc import Mapping

MAX_REPORTED_NAMES = 512
"""Globals one report may name (known and opaque together)."""

MAX_REPORTED_SIZE = 1_000_000
"""Total size of the known values of one report (items plus characters of str/bytes)."""

MAX_VALUE_DEPTH = 32
"""Nesting bound of a reported value (deeper is opaque; the plain codec allows 64)."""

MAX_NAME_CHARS = 200
"""Longest global name reported (the Host's frame check refuses longer names)."""

_SCALARS = (type(None), bool, int, float)


def _size(value: object, budget: int, depth: int = 0) -> int:
    """The plain size of ``value`` if it is plain data within ``budget``, else -1.

    Exact types only, as ``occurrences.plain`` requires (a subclass may carry behaviour).
    """
    if depth > MAX_VALUE_DEPTH or budget < 1:
        return -1
    t = type(value)
    if t in _SCALARS:
        if t is int and value.bit_length() > 4096:  # type: ignore[attr-defined]
            return -1
        return 1
    if t is str or t is bytes:
        n = 1 + len(value)  # type: ignore[arg-type]
        return n if n <= budget else -1
    if t is tuple or t is list:
        total = 1
        for item in value:  # type: ignore[attr-defined]
            n = _size(item, budget - total, depth + 1)
            if n < 0:
                return -1
            total += n
        return total
    if t is dict:
        total = 1
        for key, item in value.items():  # type: ignore[attr-defined]
            k = _size(key, budget - total, depth + 1)
            if k < 0:
                return -1
            total += k
            n = _size(item, budget - total, depth + 1)
            if n < 0:
                return -1
            total += n
        return total
    return -1


def reported_globals(
    namespace: Mapping[str, object], proxies: Mapping[str, object]
) -> tuple[list[tuple[str, object]], list[str]]:
    """``(known, opaque)``: the plain globals as (name, value), in binding order, and the
    names of the other globals.

    Skipped: dunder names, names that are not ``str`` or are too long, and a capability
    name still bound to its own proxy (the Host knows it already).
    """
    known: list[tuple[str, object]] = []
    opaque: list[str] = []
    budget = MAX_REPORTED_SIZE
    for name, value in list(namespace.items()):
        if type(name) is not str or len(name) > MAX_NAME_CHARS:
            continue
        if name.startswith("__") and name.endswith("__"):
            continue
        if name in proxies and proxies[name] is value:
            continue
        if len(known) + len(opaque) >= MAX_REPORTED_NAMES:
            break
        size = _size(value, budget)
        if size < 0:
            opaque.append(name)
        else:
            budget -= size
            known.append((name, value))
    return known, opaque
