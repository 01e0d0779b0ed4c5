"""Properties of the evaluator over generated expressions.

- Exactness: whenever `evaluate` returns a value, CPython's own `eval` of the same
  expression in a namespace built from the same environment returns an equal value of the
  same type and repr. (Equivalently: when `eval` raises, `evaluate` raises NotKnown.) `eval`
  is only run on expressions the evaluator accepted, so the test itself stays bounded.
- Robustness: on arbitrary, even malformed, ASTs `evaluate` returns or raises NotKnown,
  nothing else.
- Dependencies: `free_names` lists every binding the value depends on.
- Process independence: accepted values are the same under other hash seeds, where
  ``str`` hashes (and so set orders) differ.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import math
import os
import subprocess
import sys
import warnings
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from occurrences import NotKnown, evaluate, free_names

ENV: dict[str, object] = {
    "i": 7, "z": 0, "neg": -3, "big": 10**30, "f": 2.5, "s": "Hello, World", "e": "",
    "b": b"ab\x00c", "t": (1, "a", 2.5), "lst": [3, 1, 2], "words": ["b", "a", "c"],
    "d": {"a": 1, "b": [1, 2]}, "ss": {"x", "y", "z"}, "ns": {3, 1, 2}, "nothing": None,
}  # fmt: skip
NAMES = [*ENV, "v", "len", "str", "sorted", "undefined"]

BINOPS = ["+", "-", "*", "/", "//", "%", "**", "<<", ">>", "&", "|", "^"]
CMPOPS = ["==", "!=", "<", "<=", ">", ">=", "in", "not in", "is", "is not"]
BUILTINS = [
    "len", "str", "repr", "int", "float", "bool", "abs", "round", "min", "max", "sum",
    "sorted", "list", "tuple", "set", "frozenset", "dict", "any", "all", "reversed",
    "enumerate", "zip", "range", "chr", "ord", "hex", "bin", "divmod", "pow", "format",
    "ascii", "isinstance", "hash", "type", "id",
]  # fmt: skip
METHODS = [
    "upper", "lower", "strip", "split", "rsplit", "join", "replace", "startswith", "endswith",
    "find", "count", "index", "center", "ljust", "zfill", "partition", "encode", "decode",
    "get", "keys", "values", "items", "copy", "hex", "isdigit", "title", "splitlines",
    "bit_length", "is_integer", "removeprefix", "expandtabs", "format", "append", "pop",
]  # fmt: skip
STR_FORMATS = ["'{}'", "'{0}{0}'", "'{:>4}|{}'", "'{!r:^7}'", "'{0:.2f}'", "'{1}'", "'{:,}'"]
SPECS = ["", ">6", "^5", "<3", ".2f", "d", "x", ",", "08.3f", ".1%", "e", "*^7", "+", "s", "r"]


def paren(text: str) -> str:
    return f"({text})"


leaves = st.one_of(
    st.integers(-300, 300).map(lambda n: paren(str(n))),
    st.sampled_from(["0.5", "-0.0", "1e300", "float('nan')", "float('inf')", "3.0", "2**62"]),
    st.text(alphabet="ab Z\t\né%{}', ", max_size=4).map(repr),
    st.binary(max_size=3).map(repr),
    st.sampled_from(["True", "False", "None"]),
    st.sampled_from(NAMES),
)


def args_of(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.lists(children, max_size=3).map(", ".join)


def extend(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    two = st.tuples(children, children)
    three = st.tuples(children, children, children)
    return st.one_of(
        st.tuples(children, st.sampled_from(BINOPS), children).map(lambda t: paren(" ".join(t))),
        st.tuples(st.sampled_from(["-", "+", "~", "not "]), children).map(
            lambda t: paren("".join(t))
        ),
        st.tuples(
            children, st.sampled_from(CMPOPS), children, st.sampled_from(CMPOPS), children
        ).map(lambda t: paren(" ".join(t[:3]) if t[3] == "is" else " ".join(t))),
        st.tuples(children, st.sampled_from([" and ", " or "]), children).map(
            lambda t: paren("".join(t))
        ),
        three.map(lambda t: paren(f"{t[0]} if {t[1]} else {t[2]}")),
        two.map(lambda t: f"{t[0]}[{t[1]}]"),
        st.tuples(
            children,
            st.sampled_from(["", "1", "-1", "None"]),
            st.sampled_from(["", ":2", ":-1", "::-1", "1:"]),
        ).map(lambda t: f"{t[0]}[{t[1]}{t[2] or ':'}]"),
        args_of(children).map(lambda a: f"[{a}]"),
        args_of(children).map(lambda a: f"({a},)"),
        args_of(children).map(lambda a: f"{{{a}}}" if a else "set()"),
        st.lists(two, max_size=3).map(lambda ps: "{" + ", ".join(f"{k}: {v}" for k, v in ps) + "}"),
        st.tuples(children, st.sampled_from(["*", "**"])).map(
            lambda t: f"[{t[1] if t[1] == '*' else ''}{t[0]}]"
        ),
        st.tuples(st.sampled_from(BUILTINS), args_of(children)).map(lambda t: f"{t[0]}({t[1]})"),
        st.tuples(children, st.sampled_from(METHODS), args_of(children)).map(
            lambda t: f"{t[0]}.{t[1]}({t[2]})"
        ),
        st.tuples(
            st.sampled_from(["sorted", "max", "min"]),
            children,
            st.sampled_from(["len", "str", "abs"]),
        ).map(lambda t: f"{t[0]}({t[1]}, key={t[2]})"),
        two.map(lambda t: f"sorted({t[0]}, key=lambda v: {t[1]})"),
        two.map(lambda t: f"list(map(lambda v: {t[0]}, {t[1]}))"),
        two.map(lambda t: f"(lambda v: {t[0]})({t[1]})"),
        two.map(lambda t: f"[{t[0]} for v in {t[1]}]"),
        three.map(lambda t: f"[{t[0]} for v in {t[1]} if {t[2]}]"),
        three.map(lambda t: f"{{{t[0]}: {t[1]} for v in {t[2]}}}"),
        two.map(lambda t: f"{{{t[0]} for v in {t[1]}}}"),
        st.tuples(
            st.sampled_from(["sum", "list", "any", "''.join", "tuple"]), children, children
        ).map(lambda t: f"{t[0]}({t[1]} for v in {t[2]})"),
        st.tuples(
            children, st.sampled_from([*SPECS, "{i}"]), st.sampled_from(["", "!r", "!s", "!a"])
        ).map(lambda t: "f" + repr("{" + f"{t[0]}{t[2]}" + (f":{t[1]}" if t[1] else "") + "}")),
        st.tuples(st.sampled_from(STR_FORMATS), args_of(children)).map(
            lambda t: f"{t[0]}.format({t[1]})"
        ),
        st.tuples(
            st.sampled_from(["'%s'", "'%d'", "'%5.1f'", "'%r|%s'", "b'%s'", "'%(a)s'"]), children
        ).map(lambda t: paren(f"{t[0]} % {t[1]}")),
    )


expressions = st.recursive(leaves, extend, max_leaves=12)


def parse(source: str) -> ast.expr | None:
    try:
        return ast.parse(source, mode="eval").body
    except (SyntaxError, ValueError):
        return None


def same(got: object, want: object) -> bool:
    """Equal value, type and repr; sets compared as sets (their repr order is incidental)."""
    if type(got) is not type(want):
        return False
    if isinstance(got, set | frozenset):
        assert isinstance(want, set | frozenset)
        return sorted(map(repr, got)) == sorted(map(repr, want))
    if isinstance(got, list | tuple):
        assert isinstance(want, list | tuple)
        return len(got) == len(want) and all(same(a, b) for a, b in zip(got, want, strict=True))
    if isinstance(got, dict):
        assert isinstance(want, dict)
        return len(got) == len(want) and all(
            same(a, b) for a, b in zip(got.items(), want.items(), strict=True)
        )
    if isinstance(got, float) and math.isnan(got):
        return math.isnan(want)  # type: ignore[arg-type]
    return repr(got) == repr(want)


def cpython(node: ast.expr) -> object:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)  # `x is 1` is legal, if unwise
        code = compile(ast.Expression(node), "<property>", "eval")
    return eval(code, copy.deepcopy(ENV))


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expressions)
def test_whatever_evaluate_computes_cpython_computes(source: str) -> None:
    node = parse(source)
    if node is None:
        return
    try:
        got = evaluate(node, ENV)
    except NotKnown:
        event("not known")
        return
    event("computed")
    try:
        want = cpython(node)
    except Exception as exc:  # pragma: no cover - a failure of the property
        raise AssertionError(f"evaluate gave {got!r} but CPython raised {exc!r}") from exc
    assert same(got, want), (got, want)


@settings(max_examples=300, deadline=None)
@given(expressions)
def test_free_names_cover_every_dependency(source: str) -> None:
    """Evaluating with only the free names bound gives the same outcome as the full env."""
    node = parse(source)
    if node is None:
        return
    names = free_names(node)
    narrowed = {k: v for k, v in ENV.items() if k in names}
    try:
        full = evaluate(node, ENV)
    except NotKnown:
        return
    assert same(evaluate(node, narrowed), full)


EXPR_FIELDS = (
    "value",
    "left",
    "right",
    "operand",
    "test",
    "body",
    "orelse",
    "func",
    "elt",
    "key",
    "slice",
)
NODE_TYPES = [
    ast.BoolOp, ast.NamedExpr, ast.BinOp, ast.UnaryOp, ast.Lambda, ast.IfExp, ast.Dict, ast.Set,
    ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Await, ast.Yield,
    ast.YieldFrom, ast.Compare, ast.Call, ast.FormattedValue, ast.JoinedStr, ast.Constant,
    ast.Attribute, ast.Subscript, ast.Starred, ast.Name, ast.List, ast.Tuple, ast.Slice,
    ast.keyword, ast.comprehension, ast.Add, ast.Pow, ast.And, ast.Eq, ast.In, ast.Not,
]  # fmt: skip
junk = st.one_of(
    st.none(), st.integers(-3, 300), st.text(max_size=3), st.sampled_from(["__class__", "x", "s"]),
    st.floats(), st.binary(max_size=2), st.sampled_from([ast.Load(), ast.Store(), 115, -1]),
)  # fmt: skip


def build(children: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    @st.composite
    def node(draw: st.DrawFn) -> object:
        cls: Any = draw(st.sampled_from(NODE_TYPES))
        fields: dict[str, object] = {}
        for field in cls._fields:
            if draw(st.booleans()):
                fields[field] = draw(st.lists(children, max_size=3))
            else:
                fields[field] = draw(children)
        return cls(**fields)

    return node()


arbitrary_nodes = st.recursive(junk, build, max_leaves=20)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(arbitrary_nodes)
def test_arbitrary_ast_only_ever_gives_not_known(node: object) -> None:
    with contextlib.suppress(NotKnown):
        evaluate(node, ENV)  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(["'a'", "'bc'", "'d'", "1", "2.5", "(1, 'x')", "None", "b'y'"]), max_size=5
    )
)
def test_arbitrary_ast_accepts_generated_sets_of_anything(elements: list[str]) -> None:
    """Sets of any plain elements: sorted/len/in are computed, orders never leak."""
    display = "{" + ", ".join(elements) + "}" if elements else "set()"
    for template in ("len({})", "sorted({})", "list({})", "str({})", "'a' in {}", "min({})"):
        node = parse(template.format(display))
        assert node is not None
        try:
            got = evaluate(node, {})
        except NotKnown:
            continue
        assert same(got, cpython(node))


def has_set(value: object) -> bool:
    if isinstance(value, set | frozenset):
        return True
    if isinstance(value, list | tuple):
        return any(has_set(v) for v in value)
    if isinstance(value, dict):
        return any(has_set(v) for v in (*value.keys(), *value.values()))
    return False


HASH_SEED_PROGRAM = """
import ast, copy, sys
env = eval(sys.argv[1])
for line in sys.stdin.read().split("\\x00"):
    if line:
        print(repr(eval(compile(ast.Expression(ast.parse(line, mode='eval').body), '<x>', 'eval'), copy.deepcopy(env))))
"""


@settings(
    max_examples=4,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.lists(expressions, min_size=40, max_size=80))
def test_accepted_values_do_not_depend_on_the_hash_seed(sources: list[str]) -> None:
    """str hashes differ between processes; a value computed here must not show that."""
    accepted = []
    for source in sources:
        node = parse(source)
        if node is None:
            continue
        try:
            got = evaluate(node, ENV)
        except NotKnown:
            continue
        if not has_set(got):  # a set's own repr order is incidental, not part of its value
            accepted.append((source, repr(got)))
    if not accepted:
        return
    for seed in ("1", "2"):
        out = subprocess.run(
            [sys.executable, "-c", HASH_SEED_PROGRAM, repr(ENV)],
            input="\x00".join(s for s, _ in accepted),
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": seed, "PYTHONIOENCODING": "utf-8"},
            encoding="utf-8",
            check=True,
        ).stdout.splitlines()
        assert out == [r for _, r in accepted]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=3), inner, max_size=4)
        | st.lists(inner, max_size=3).map(tuple)
    ),
    max_leaves=15,
)
TEMPLATES = [
    "x", "x[0]", "x[-1:]", "len(x)", "sorted(x)", "str(x)", "repr(x)", "x == y", "x != y",
    "x < y", "x in y", "list(x)", "tuple(x)", "f'{x}|{y!r}'", "[i for i in x]", "x.get('a')",
    "x.count(y)", "x.index(y)", "list(x.items())", "dict(x)", "set(x)", "max(x)", "sum(x)",
    "{**x}", "[*x, *y]", "(x, y)", "[x] * 3", "x + y", "x * 2", "bool(x)", "x or y", "not x",
    "'%s' % (x,)", "'{}'.format(x)", "{'k': x}", "len(str(x))", "x[0][0]", "sorted(x, key=str)",
]  # fmt: skip


def leaves_of(value: object) -> list[int]:
    """ids of every mutable container inside a value."""
    found: list[int] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, list | dict):
            found.append(id(v))
        if isinstance(v, list | tuple):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
    return found


@settings(max_examples=400, deadline=None)
@given(json_values, json_values, st.sampled_from(TEMPLATES))
def test_json_like_env_values_read_exactly_never_aliased_never_mutated(
    x: object, y: object, template: str
) -> None:
    """Tool results (JSON-like) in env: exact reads, fresh results, env left untouched."""
    env = {"x": x, "y": y}
    before = repr(env)
    node = parse(template)
    assert node is not None
    try:
        got = evaluate(node, env)
    except NotKnown:
        assert repr(env) == before
        return
    assert repr(env) == before
    assert not set(leaves_of(got)) & set(leaves_of(env))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        want = eval(compile(ast.Expression(node), "<json>", "eval"), copy.deepcopy(env))
    assert same(got, want), (got, want)
