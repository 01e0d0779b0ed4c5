"""Parsing a piece of the source at its final line numbers.

The prefix parser parses each group (and each provisional parse) on its own text, so its
nodes start at line 1 and must be moved to where the group stands in the whole source.
Moving them is a walk over every node in Python (``shift_lines``); giving ``ast.parse``
that many empty lines first costs about 16 ns a line in C instead. The two give the same
nodes (an empty line changes nothing but the line numbers after it; a ``str`` source has no
coding cookie to displace), so each is used where it is cheaper: empty lines before the
first ``PREFIX_LINES`` lines of a program, the walk further down (where the empty lines
would make a long stream quadratic).
"""

from __future__ import annotations

import ast
from typing import Final

from ..depth import parse

PREFIX_LINES: Final = 256
"""Most empty lines put before a piece (about 4 us); below it, the walk moves the nodes
(about 3 us per line of the piece, so a typical group breaks even near here)."""


def parse_at(source: str, line: int) -> ast.Module:
    """``ast.parse(source)`` with ``source`` starting at line ``line`` of the whole source,
    its warnings suppressed independently of the warning filters (under ``-W error`` an
    invalid escape would otherwise be a SyntaxError here).

    A source nested past CPython's limits raises what CPython raises (``SyntaxError``,
    ``RecursionError``, ``MemoryError``), at the same depth from any caller (``occurrences.depth``)."""
    shift = line - 1
    text = "\n" * shift + source if 0 < shift <= PREFIX_LINES else source
    module = parse(text, quiet=True)
    if shift > PREFIX_LINES:
        shift_lines(module.body, shift)
    return module


_POSITIONED: dict[type, tuple[bool, tuple[str, ...]]] = {}
"""Per node class: whether it carries line attributes, and its fields that can hold nodes."""

_LEAF_FIELDS: Final = frozenset(
    {"ctx", "op", "id", "attr", "module", "level", "kind", "type_comment", "is_async"}
    | {"simple", "conversion"}
)
"""Fields that never hold a positioned node (strings, ints, and the shared context and
operator singletons), so the shift does not visit them. Not ``name`` or ``arg``: a string
in most nodes, but ``TypeAlias.name`` (3.12+) is a ``Name``."""


def shift_lines(nodes: list[ast.stmt], shift: int) -> None:
    """``ast.increment_lineno`` for a list of statements, without ``ast.walk``'s
    generator overhead (it dominated streaming time).

    Only ``lineno``/``end_lineno`` attributes move; nodes without positions (contexts,
    operators, ``arguments``...) are only traversed, and the shared singletons among them
    (``Load()``, ``Add()``) are never written.
    """
    stack: list[ast.AST] = list(nodes)
    pop = stack.pop
    push = stack.append
    table = _POSITIONED
    while stack:
        node = pop()
        kind = type(node)
        info = table.get(kind)
        if info is None:
            fields = tuple(f for f in kind._fields if f not in _LEAF_FIELDS)
            if kind is ast.Constant:
                fields = ()
            info = table[kind] = ("lineno" in kind._attributes, fields)
        positioned, fields = info
        if positioned:
            node.lineno += shift  # type: ignore[attr-defined]
            end = node.end_lineno  # type: ignore[attr-defined]
            if end is not None:
                node.end_lineno = end + shift  # type: ignore[attr-defined]
        for name in fields:
            value = getattr(node, name, None)
            if isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.AST):
                        push(item)
            elif isinstance(value, ast.AST):
                push(value)
