"""Which names an expression reads from its enclosing scope, without evaluating it.

Discovery needs this before anything is known: the names a call's arguments read decide
which earlier results it waits for. It follows CPython's scoping exactly as the evaluator
does (``target_names`` is shared by both): comprehension targets and lambda parameters are
local where CPython makes them local.

Discovery asks it for nearly every expression it meets, so the walk skips the leaves that
can hold no name (``NAMELESS``) instead of visiting them; ``child_nodes`` and ``walk`` do
the same for discovery's own walks that look for names, calls or statements.
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Iterable, Iterator
from typing import Final

NAMELESS: Final = (ast.expr_context, ast.operator, ast.boolop, ast.unaryop, ast.cmpop, ast.Constant)
"""Node types with no name, call or other node below them: ``Load``/``Store``, operators,
constants. Any walk that looks for names or calls can skip them (they are most of the
children ``ast.iter_child_nodes`` yields: every ``Name`` has a ``ctx``)."""


_LEAF_FIELDS: Final = frozenset(
    {"ctx", "op", "ops", "id", "attr", "arg", "module", "level", "kind", "type_comment", "is_async"}
    | {"simple", "conversion"}
)
"""Fields that only ever hold strings, ints, None or ``NAMELESS`` nodes (contexts,
operators), in every node class that has them. Not ``name`` or ``names``: a string in most
nodes, but ``TypeAlias.name`` (3.12+) is a ``Name`` and ``Import.names`` holds ``alias``
nodes."""

_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}
"""Per node class: its fields that can hold a node ``child_nodes`` returns."""


def child_nodes(node: ast.AST) -> list[ast.AST]:
    """``ast.iter_child_nodes(node)`` without the ``NAMELESS`` leaves, in the same order."""
    kind = type(node)
    fields = _CHILD_FIELDS.get(kind)
    if fields is None:
        fields = (
            ()
            if issubclass(kind, NAMELESS)
            else tuple(f for f in kind._fields if f not in _LEAF_FIELDS)
        )
        _CHILD_FIELDS[kind] = fields
    found: list[ast.AST] = []
    for field in fields:
        value = getattr(node, field, None)
        if type(value) is list:
            for item in value:
                if isinstance(item, ast.AST) and not isinstance(item, NAMELESS):
                    found.append(item)
        elif isinstance(value, ast.AST) and not isinstance(value, NAMELESS):
            found.append(value)
    return found


def walk(node: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk(node)`` without the ``NAMELESS`` leaves, in the same (breadth-first) order."""
    todo = deque([node])
    while todo:
        current = todo.popleft()
        todo.extend(child_nodes(current))
        yield current


def target_names(target: ast.AST) -> Iterator[str]:
    """Names a ``for`` target binds (nested tuples and starred included)."""
    stack = [target]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name):
            yield node.id
        elif isinstance(node, ast.Tuple | ast.List):
            stack.extend(node.elts)
        elif isinstance(node, ast.Starred):
            stack.append(node.value)


def bound_names(nodes: Iterable[ast.AST], *, parameters: bool = False) -> set[str]:
    """Every name the code in ``nodes`` may bind or delete, wherever it sits in it (nested
    functions and classes included): assignment and ``for``/``with``/walrus targets, ``del``,
    ``def``/``class`` names, imports, ``except ... as``, ``match`` captures, and the names a
    ``global``/``nonlocal`` declares. With ``parameters``, function and lambda parameters
    too (names bound in *some* scope, as a pass that renames must know); without, only
    names that a scope of the code itself or the one around it may see rebound.

    The one copy of this idea: discovery forgets what these names held when it cannot follow
    the code, and the projection pass refuses a capability name the program may rebind."""
    names: set[str] = set()
    for node in nodes:
        for inner in walk(node):
            if isinstance(inner, ast.Name) and not isinstance(inner.ctx, ast.Load):
                names.add(inner.id)
            elif isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(inner.name)
            elif isinstance(inner, ast.alias):
                names.add((inner.asname or inner.name).split(".")[0])
            elif isinstance(inner, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and inner.name:
                names.add(inner.name)
            elif isinstance(inner, ast.MatchMapping) and inner.rest:
                names.add(inner.rest)
            elif isinstance(inner, ast.Global | ast.Nonlocal):
                names.update(inner.names)
            elif parameters and isinstance(inner, ast.arg):
                names.add(inner.arg)
    return names


def free_names(node: ast.AST) -> frozenset[str]:
    """Names ``node`` reads from its enclosing scope.

    Names bound by a comprehension (or lambda parameters) inside ``node`` are excluded
    where they are local; the first iterable of a comprehension and lambda defaults are read
    in the enclosing scope, as in CPython. Iterative, so any nesting depth is fine.
    """
    found: set[str] = set()
    stack: list[tuple[ast.AST, frozenset[str]]] = [(node, frozenset())]
    while stack:
        current, bound = stack.pop()
        if isinstance(current, ast.Name):
            if isinstance(current.ctx, ast.Load) and current.id not in bound:
                found.add(current.id)
        elif isinstance(current, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
            gens = current.generators
            if not gens:
                continue
            inner = bound | {n for g in gens for n in target_names(g.target)}
            stack.append((gens[0].iter, bound))
            for i, g in enumerate(gens):
                if i:
                    stack.append((g.iter, inner))
                stack.extend((cond, inner) for cond in g.ifs)
                stack.append((g.target, inner))  # a subscript target reads names
            if isinstance(current, ast.DictComp):
                stack.append((current.key, inner))
                stack.append((current.value, inner))
            else:
                stack.append((current.elt, inner))
        elif isinstance(current, ast.Lambda):
            a = current.args
            params = [*a.posonlyargs, *a.args, *a.kwonlyargs]
            params += [p for p in (a.vararg, a.kwarg) if p is not None]
            stack.extend((d, bound) for d in [*a.defaults, *a.kw_defaults] if d is not None)
            stack.append((current.body, bound | {p.arg for p in params}))
        else:
            stack += [(child, bound) for child in child_nodes(current)]
    return frozenset(found)
