"""pure_scalar_fold and pure_scalar_cse: snippets that apply (derived source, same outcome)
and snippets that do not (with the reason), on the in-process Guest."""

from __future__ import annotations

import ast

import pytest

from pysolate.passes import (
    Applied,
    NotApplicable,
    PassOutcome,
    PureScalarCSE,
    PureScalarFold,
    SourcePass,
    apply_source_passes,
)


def run(source: str, *passes: SourcePass) -> tuple[str, tuple[PassOutcome, ...]]:
    result = apply_source_passes(source, ast.parse(source), list(passes), {})
    return result.source, result.outcomes


def outcome_of(source: str) -> tuple[object, ...]:
    """What the program computes: its namespace (names only) and last-expression value."""
    tree = ast.parse(source)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    env: dict[str, object] = {}
    exec(compile(tree, "<agent>", "exec"), env)
    value = (
        eval(compile(ast.Expression(last.value), "<agent>", "eval"), env)
        if isinstance(last, ast.Expr)
        else None
    )
    return value, type(value)


@pytest.mark.parametrize(
    ("source", "derived"),
    [
        ("x = 3\ny = x * 4 + 2\nz = y - x\nz += 1\nz", "x = 3\ny = 14\nz = 11\nz = 12\n12"),
        ("t = True\nu = t * t\nu", "t = True\nu = 1\n1"),
        ("a = 5\n-a", "a = 5\n(-5)"),
        ("x = 1\ny = (x +\n     2)\ny", "x = 1\ny = ((3\n))\n3"),
        ("x = 2\nx = x * x\nx", "x = 2\nx = 4\n4"),
    ],
)
def test_fold_applies_and_keeps_the_outcome(source: str, derived: str) -> None:
    got, outcomes = run(source, PureScalarFold())
    assert got == derived
    assert (
        isinstance(outcomes[0], Applied) and outcomes[0].original_hash != outcomes[0].derived_hash
    )
    assert outcome_of(got) == outcome_of(source)
    assert [s.lineno for s in ast.parse(got).body] == [s.lineno for s in ast.parse(source).body]


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("import os\nx = 1", "Import statement"),
        ("x = len('a')", "Call"),
        ("print(1 + 2)", "Call"),
        ("if True:\n    x = 1", "If statement"),
        ("x = 1\ny = x ** 2", "operator Pow"),
        ("x = 1 / 2", "operator Div"),
        ("x = 1.5 + 1", "float literal"),
        ("y = x + 1", "name 'x' not bound"),
        ("x = __debug__ + 1", "name '__debug__' not bound"),
        ("x = f.__code__", "Attribute"),
        ("x = 1\nx //= 2", "AugAssign statement"),
        ("x: int = 1", "AnnAssign statement"),
        ("a, b = 1, 2", "Assign statement"),
        ("x = 2**62\n", "operator Pow"),
        ("x = 9223372036854775807\ny = x + 1", "leaves the int64 range"),
        ("x = -9223372036854775808\ny = x * -1\ny", "leaves the int64 range"),
        ("x = 1\ny = 2", "nothing to fold"),
        ("", "empty program"),
    ],
)
def test_fold_not_applicable(source: str, reason: str) -> None:
    got, outcomes = run(source, PureScalarFold())
    assert got == source
    assert isinstance(outcomes[0], NotApplicable) and reason in outcomes[0].reason


def test_fold_checks_intermediates_not_only_results() -> None:
    """(2**62 * 4) - big would fit int64 at the end, but its intermediate does not."""
    source = "a = 4611686018427387904\nb = a * 4 - a * 4\nb"
    _, outcomes = run(source, PureScalarFold())
    assert isinstance(outcomes[0], NotApplicable) and "int64" in outcomes[0].reason


@pytest.mark.parametrize(
    ("source", "derived"),
    [
        (
            "x = 4611686018427387904\ny = x*x + 1\nz = (x*x + 1) * (x*x)\nz - y",
            "x = 4611686018427387904\ny = x*x + 1\nz = (y) * (x*x)\nz - y",
        ),
        ("a = 3\nb = a*a\nc = a*a - b\nc", "a = 3\nb = a*a\nc = b - b\nc"),
        ("a = 3\nb = -a\nc = -a * 2\nc", "a = 3\nb = -a\nc = b * 2\nc"),
    ],
)
def test_cse_reuses_a_name_holding_the_same_expression(source: str, derived: str) -> None:
    got, outcomes = run(source, PureScalarCSE())
    assert got == derived
    assert isinstance(outcomes[0], Applied)
    assert outcome_of(got) == outcome_of(source)


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("a = 3\nb = a*a\na = 4\nc = a*a", "no repeated"),  # an input was rebound
        ("a = 3\nb = a*a\nb = 1\nc = a*a", "no repeated"),  # the holder was rebound
        ("a = 3\na = a*a\nc = a*a", "no repeated"),  # the holder reads itself
        ("a = 3\nb = a*a\nb += 1\nc = a*a", "no repeated"),
        ("a = 3\nb = -1\nc = -1", "no repeated"),  # literals are not computations
        ("a = [1]\nb = a + a\nc = a + a", "List"),
        ("s = 'x'\nb = s + s\nc = s + s", "str literal"),
    ],
)
def test_cse_not_applicable(source: str, reason: str) -> None:
    got, outcomes = run(source, PureScalarCSE())
    assert got == source
    assert isinstance(outcomes[0], NotApplicable) and reason in outcomes[0].reason


def test_fold_then_cse_each_reported() -> None:
    _, outcomes = run("x = 2\ny = x + 1\ny", PureScalarFold(), PureScalarCSE())
    assert [(o.name, o.applied) for o in outcomes] == [
        ("pure_scalar_fold", True),
        ("pure_scalar_cse", False),
    ]
