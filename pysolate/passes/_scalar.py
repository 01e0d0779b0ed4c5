"""``pure_scalar_fold`` and ``pure_scalar_cse``: the two narrow pure-computation passes.

Both accept only a *closed top-level scalar program*: top-level statements that are an
assignment to plain names, an augmented assignment ``name op= expr`` or an expression
statement, whose expressions are bool/int literals, names bound by an earlier statement,
and ``+``/``-``/``*`` (binary, and unary ``-``/``+``). No import, call, attribute,
subscript, control flow or any other construct, so nothing can reach a capability, the
interpreter's introspection or a name the program did not bind itself. Anything else makes
the whole pass ``not_applicable`` — there is no partial rewrite to get wrong.

- ``pure_scalar_fold`` evaluates each expression with Python's own operators and replaces
  it by its literal, only when every intermediate value fits a signed 64-bit int (Python
  ints are unbounded; beyond int64 the literal could be huge, so the pass declines).
- ``pure_scalar_cse`` replaces a subexpression identical to the whole right-hand side of an
  earlier ``name = expr`` by ``name``, while neither ``name`` nor any name in ``expr`` has
  been rebound since. Int and bool arithmetic is deterministic and immutable, so the name
  holds exactly the value (and type) the subexpression would compute.

In this subset nothing can raise (no name is unbound, int arithmetic cannot overflow), and
every rewrite keeps each statement's lines (``same_lines``), so errors could not move either.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ._framework import Capabilities, Edit, NotApplicable, Offsets, Rewrite, same_lines

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
"""The range every folded value and intermediate must lie in."""

_BINARY: dict[type[ast.operator], Callable[[object, object], object]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], object]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


class _Unsupported(Exception):
    """The program is not a closed top-level scalar program."""


def _value_parts(stmt: ast.stmt) -> tuple[list[str], ast.expr]:
    """(names bound, the expression) of a supported statement; raises ``_Unsupported``."""
    if isinstance(stmt, ast.Assign) and all(isinstance(t, ast.Name) for t in stmt.targets):
        return [t.id for t in stmt.targets if isinstance(t, ast.Name)], stmt.value
    if (
        isinstance(stmt, ast.AugAssign)
        and isinstance(stmt.target, ast.Name)
        and type(stmt.op) in _BINARY
    ):
        return [stmt.target.id], stmt.value
    if isinstance(stmt, ast.Expr):
        return [], stmt.value
    raise _Unsupported(f"line {stmt.lineno}: {type(stmt).__name__} statement")


def _check_expr(expr: ast.expr, bound: set[str]) -> None:
    for node in ast.walk(expr):
        if isinstance(node, ast.Constant):
            if type(node.value) not in (bool, int):
                raise _Unsupported(f"line {node.lineno}: {type(node.value).__name__} literal")
        elif isinstance(node, ast.Name):
            if node.id not in bound:
                raise _Unsupported(f"line {node.lineno}: name {node.id!r} not bound by the program")
        elif isinstance(node, ast.BinOp):
            if type(node.op) not in _BINARY:
                raise _Unsupported(f"line {node.lineno}: operator {type(node.op).__name__}")
        elif isinstance(node, ast.UnaryOp):
            if type(node.op) not in _UNARY:
                raise _Unsupported(f"line {node.lineno}: operator {type(node.op).__name__}")
        elif not isinstance(node, ast.Load | ast.operator | ast.unaryop):
            raise _Unsupported(f"line {getattr(node, 'lineno', '?')}: {type(node).__name__}")


def closed_scalar_program(tree: ast.Module) -> str | None:
    """``None`` when ``tree`` is a closed top-level scalar program, else why not."""
    if not tree.body:
        return "empty program"
    bound: set[str] = set()
    try:
        for stmt in tree.body:
            names, expr = _value_parts(stmt)
            if isinstance(stmt, ast.AugAssign) and names[0] not in bound:
                raise _Unsupported(
                    f"line {stmt.lineno}: name {names[0]!r} not bound by the program"
                )
            _check_expr(expr, bound)
            bound.update(names)
    except _Unsupported as exc:
        return str(exc)
    return None


class _Int64Exceeded(Exception):
    pass


def _fits(value: object) -> object:
    assert type(value) in (bool, int)
    if not INT64_MIN <= value <= INT64_MAX:  # type: ignore[operator]
        raise _Int64Exceeded
    return value


def _evaluate(expr: ast.expr, env: dict[str, object]) -> object:
    if isinstance(expr, ast.Constant):
        return _fits(expr.value)
    if isinstance(expr, ast.Name):
        return env[expr.id]
    if isinstance(expr, ast.BinOp):
        left, right = _evaluate(expr.left, env), _evaluate(expr.right, env)
        return _fits(_BINARY[type(expr.op)](left, right))
    assert isinstance(expr, ast.UnaryOp)
    return _fits(_UNARY[type(expr.op)](_evaluate(expr.operand, env)))


def _literal(value: object) -> str:
    text = repr(value)
    return f"({text})" if text.startswith("-") else text


class _ScalarPass:
    """What the scalar passes share: each applies to a closed int64 scalar program only
    (``closed_scalar_program``), and says why not otherwise; ``_closed`` is the pass."""

    __slots__ = ()
    name: str

    def rewrite(
        self, source: str, tree: ast.Module, capabilities: Capabilities
    ) -> Rewrite | NotApplicable:
        why = closed_scalar_program(tree)
        if why is not None:
            return NotApplicable(self.name, f"not a closed scalar program: {why}")
        return self._closed(source, tree)

    def _closed(self, source: str, tree: ast.Module) -> Rewrite | NotApplicable:
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class PureScalarFold(_ScalarPass):
    """Fold every expression of a closed int64 scalar program to its literal."""

    name: str = "pure_scalar_fold"

    def _closed(self, source: str, tree: ast.Module) -> Rewrite | NotApplicable:
        offsets, env, edits = Offsets(source), dict[str, object](), list[Edit]()
        for stmt in tree.body:
            names, expr = _value_parts(stmt)
            try:
                value = _evaluate(expr, env)
                if isinstance(stmt, ast.AugAssign):
                    assert isinstance(stmt.target, ast.Name)
                    value = _fits(_BINARY[type(stmt.op)](env[stmt.target.id], value))
            except _Int64Exceeded:
                return NotApplicable(
                    self.name, f"line {stmt.lineno}: a value leaves the int64 range"
                )
            for n in names:
                env[n] = value
            if isinstance(stmt, ast.AugAssign):  # ``x += e`` becomes ``x = <literal>``
                assert stmt.target.end_lineno is not None and stmt.target.end_col_offset is not None
                start = offsets.at(stmt.target.end_lineno, stmt.target.end_col_offset)
                end = offsets.span(stmt)[1]
                edits.append(
                    Edit(start, end, " = " + same_lines(_literal(value), source[start:end]))
                )
            elif not isinstance(expr, ast.Constant):
                start, end = offsets.span(expr)
                edits.append(Edit(start, end, same_lines(_literal(value), source[start:end])))
        if not edits:
            return NotApplicable(self.name, "nothing to fold")
        return Rewrite(
            tuple(edits), law="int64 arithmetic of bool/int literals", detail=f"{len(edits)} folded"
        )


def _subexpressions(expr: ast.expr) -> Iterator[ast.expr]:
    """Operator nodes of ``expr``, outermost first (so the largest match wins)."""
    if isinstance(expr, ast.BinOp):
        yield expr
        yield from _subexpressions(expr.left)
        yield from _subexpressions(expr.right)
    elif isinstance(expr, ast.UnaryOp):
        if not isinstance(expr.operand, ast.Constant):  # ``-1`` is a literal, not a computation
            yield expr
        yield from _subexpressions(expr.operand)


def _shape(expr: ast.expr) -> str:
    return ast.dump(expr, annotate_fields=False, include_attributes=False)


def _names(expr: ast.expr) -> set[str]:
    return {n.id for n in ast.walk(expr) if isinstance(n, ast.Name)}


@dataclass(frozen=True, slots=True)
class PureScalarCSE(_ScalarPass):
    """Reuse a name that already holds an identical pure scalar subexpression."""

    name: str = "pure_scalar_cse"

    def _closed(self, source: str, tree: ast.Module) -> Rewrite | NotApplicable:
        offsets = Offsets(source)
        available: dict[str, tuple[str, set[str]]] = {}  # shape → (name holding it, names it reads)
        edits: list[Edit] = []
        for stmt in tree.body:
            targets, expr = _value_parts(stmt)
            skip: set[int] = set()
            for sub in _subexpressions(expr):
                if id(sub) in skip:
                    continue
                held = available.get(_shape(sub))
                if held is None:
                    continue
                start, end = offsets.span(sub)
                edits.append(Edit(start, end, same_lines(held[0], source[start:end])))
                skip.update(id(n) for n in ast.walk(sub))
            for name in targets:  # rebinding invalidates what reads or holds the name
                available = {
                    s: h for s, h in available.items() if name != h[0] and name not in h[1]
                }
            if (
                isinstance(stmt, ast.Assign)
                and next(_subexpressions(expr), None) is expr
                and not set(targets) & _names(expr)
            ):
                available.setdefault(_shape(expr), (targets[0], _names(expr)))
        if not edits:
            return NotApplicable(self.name, "no repeated pure scalar subexpression")
        return Rewrite(
            tuple(edits),
            law="pure int/bool arithmetic is deterministic",
            detail=f"{len(edits)} reused",
        )
