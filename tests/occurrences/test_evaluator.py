"""The argument evaluator on ordinary expressions: snippet -> value CPython computes, or NotKnown.

Each `EXACT` snippet is evaluated both by `evaluate` and by CPython's `eval` on a copy of
the same environment; the two must agree in value, type and repr.
"""

from __future__ import annotations

import ast
import copy
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from occurrences import UNKNOWN, Limits, NotKnown, evaluate, evaluate_call_arguments, free_names
from occurrences.evaluator._free_names import NAMELESS, child_nodes, walk

ENV: dict[str, object] = {
    "name": "report",
    "n": 7,
    "ratio": 0.25,
    "blob": b"ab\x00",
    "pair": (1, "two"),
    "items": [3, 1, 2],
    "cfg": {"path": "docs/a.md", "tags": ["x", "y"], "depth": 2},
    "rows": [{"id": 1, "title": "A"}, {"id": 2, "title": "B"}],
    "nums": {1.5, 2.5},
}


def expr(source: str) -> ast.expr:
    return ast.parse(source, mode="eval").body


def ev(source: str, env: Mapping[str, object] | None = None, **kwargs: object) -> object:
    return evaluate(expr(source), ENV if env is None else env, **kwargs)  # type: ignore[arg-type]


def cpython(source: str, env: Mapping[str, object] | None = None) -> object:
    namespace = copy.deepcopy(dict(ENV if env is None else env))
    return eval(compile(ast.Expression(expr(source)), "<test>", "eval"), namespace)


def assert_same(got: object, want: object) -> None:
    assert type(got) is type(want)
    assert repr(got) == repr(want)


EXACT = [
    # literals and names
    "None", "True", "42", "-0.0", "1e300 * 10", "'s'", "b'\\xff'", "name", "pair",
    # operators
    "n + 1", "n / 2", "n // 2", "-n % 3", "2 ** 10", "2 ** -2", "n << 3", "~n", "n & 3 | 8 ^ 1",
    "ratio * 3", "True + True", "'ab' * 3", "3 * 'ab'", "[0] * 4", "(1,) * 0", "'a' + name",
    "items + [4]", "pair + (3,)", "{'a': 1} | {'b': 2}", "{1, 2} - {2}", "nums | {3.5}",
    "not items", "-True", "+ratio", "divmod(n, 3)",
    # comparisons and boolean logic, short-circuiting exactly
    "1 < n < 10", "1 < n > 10", "n == 7.0", "'a' in name", "'path' in cfg", "3 in items",
    "2 not in nums", "name is None", "cfg is not None", "n and name", "0 or items",
    "0 and 1 / 0", "1 or 1 / 0", "'x' if n > 3 else 'y'", "1 / 0 if False else 2",
    "(1, 2) < (1, 3)", "[1, 2] == [1, 2]", "5 in range(10)",
    # f-strings: conversions and format specs, nested specs included
    "f'{name}-{n:03d}-{ratio:.1%}'", "f'{name!r:>10}|{pair!s}|{blob!a}'", "f'{n:{n}}'",
    "f'{ratio:e}'", "f'{n:,}'", "f'{cfg}'", "f'{items!r}'", "f'{3.0}'", "f'{True}'",
    # %-formatting
    "'%s-%04d' % (name, n)", "'%(path)s' % cfg", "'%.3f' % ratio", "b'%s' % blob", "'%%%d%%' % n",
    "'%(path)s/%(depth)03d' % cfg", "'%-6s|%+.1e' % (name, ratio)", "'%c%%' % 65",
    # subscripts and slices
    "name[0]", "name[-1]", "name[::-1]", "name[1:3]", "pair[1]", "items[::2]", "cfg['path']",
    "cfg['tags'][1]", "rows[1]['title']", "range(10)[2:8:3]", "range(10**12)[5]", "blob[1]",
    # displays, starred included
    "[n, name]", "(n,)", "{n, 1}", "{'k': n, **cfg}", "[*items, *pair]", "(*'ab',)", "{*items}",
    # comprehensions, nested and with CPython's scoping
    "[i * i for i in range(5) if i % 2]", "[c for c in name if c > 'm']",
    "{k: v for k, v in cfg.items() if k != 'tags'}", "{x % 3 for x in items}",
    "[(i, j) for i in range(3) for j in range(i)]", "[[y for y in range(x)] for x in range(3)]",
    "[r['title'] for r in rows if r['id'] > 1]", "[(a, b) for a, *b in [(1, 2, 3), (4, 5)] if b]",
    "[x for x in sorted(nums)]", "sum(x * 2 for x in items)", "[n for n in range(3)] + [n]",
    # builtins
    "len(name)", "len(cfg)", "len(range(10**12))", "str(n)", "str(items)", "repr(name)",
    "int('12')", "int('ff', 16)", "int(2.9)", "float('1.5')", "float('nan')", "bool('')",
    "abs(-3)", "round(2.675, 2)", "round(7, -1)", "round(2.5)", "min(items)", "max(items)",
    "max('a', 'b', key=len)", "min([], default=0)", "max(rows, key=len)", "sorted(items)",
    "sorted(name, reverse=True)", "sorted(cfg, key=len)", "sorted(['bb', 'a', 'cc'], key=len)",
    "sorted({'b', 'a'})", "sum(items)", "sum(items, 10)", "sum([0.1] * 10)", "any(items)",
    "all([])", "list(range(3))", "tuple(name)", "dict(a=1, b=n)", "dict(zip('ab', items))",
    "dict([('x', 1)])", "set(items)", "frozenset(items)", "list(enumerate(name, 1))",
    "list(zip(name, items))", "list(reversed(items))", "''.join(reversed(name))",
    "list(map(str, items))", "list(filter(None, [0, 1, '', 'a']))", "list(filter(bool, items))",
    "isinstance(name, str)", "isinstance(n, (str, float))", "isinstance(True, int)",
    "chr(65)", "ord('a')", "hex(255)", "oct(8)", "bin(5)", "pow(2, 10)", "pow(3, 4, 5)",
    "format(ratio, '.2f')", "ascii('é')", "range(1, 10, 2)",
    # methods
    "name.upper()", "name.replace('r', 'R', 1)", "name.startswith(('re', 'x'))",
    "'-'.join(['a', 'b'])", "', '.join(str(i) for i in items)", "'a,b,,c'.split(',')",
    "' x y '.split()", "'a b c'.rsplit(None, 1)", "'l1\\nl2\\r\\n'.splitlines(True)",
    "name.center(11, '*')", "name.zfill(9)", "'a\\tb'.expandtabs(4)", "name.encode()",
    "blob.decode('latin-1')", "blob.hex()", "name.find('p')", "name.count('r')",
    "name.partition('p')", "name.removeprefix('re')", "'Ab'.swapcase()", "'x'.isidentifier()",
    "cfg.get('depth')", "cfg.get('missing', 0)", "list(cfg.keys())", "list(cfg.values())",
    "name.format()", "'{}-{}'.format(name, n)", "'{1}{0}{1}'.format(name, n)",
    "'{x!r:>12}|{y:.2f}|{{lit}}'.format(x=name, y=ratio)", "'{0:,}'.format(10**6)",
    "items.index(2)", "items.count(3)",
    # lambdas, called in place: key, map and filter functions, direct calls, closures
    "sorted(rows, key=lambda r: r['title'], reverse=True)", "max(items, key=lambda x: -x)",
    "list(map(lambda x, y: x * y, items, items))", "list(filter(lambda c: c > 'm', name))",
    "(lambda a, b=None: a)(1) if False else (lambda a, b: a + b)(1, b=2)", "(lambda: n)()",
    "[(lambda y: y + x)(1) for x in items]", "(lambda x: [y * x for y in items])(2)",
    "(lambda len: len)(3)", "min(cfg, key=lambda k: len(cfg[k]) if k == 'tags' else 0)", "pair.index('two')", "n.bit_length()",
    "ratio.is_integer()", "len(cfg.items())", "'path' in cfg.keys()", "items.copy()",
]  # fmt: skip


@pytest.mark.parametrize("source", EXACT)
def test_value_equals_cpython(source: str) -> None:
    """Whatever the evaluator computes is exactly what CPython computes."""
    assert_same(ev(source), cpython(source))


NOT_KNOWN = [
    # CPython itself raises: the Guest raises it for real at run time
    "1 / 0", "cfg['missing']", "items[10]", "int('x')", "name + 1", "max([])", "[].index(1)",
    "chr(-1)", "'%d' % 'x'", "pair[0:1:0]", "{[]: 1}", "undefined_name", "(1, 2)[1.0]",
    # values the Host must not compute
    "print('x')", "open('f')", "eval('1')", "exec('1')", "getattr(name, 'upper')", "vars()",
    "type(name)", "id(name)", "hash(name)", "iter(items)", "next(iter(items))", "input()",
    "'{0.real}'.format(1)", "'{a[0]}'.format(a=name)", "'{:{}}'.format(1, 5)", "name.__len__()", "name.upper",
    "(x := 1)", "lambda: 1", "[lambda: 1]", "(lambda *a: a)(1)", "(lambda a=1: a)()",
    "(lambda a, /: a)(a=1)", "(lambda a: a)(1, 2)", "(lambda a: a)()", "(lambda __a: 1)(1)",
    "sorted(items, key=lambda x: (x, float('nan')))", "cfg.update({})", "items.append(1)", "items.sort()", "items.pop()",
    "rows[0].setdefault('k', 1)", "cfg.pop('path')", "blob.decode('rot13')", "name.encode('idna')",
    # iterators are consumed inside the expression, never handed out or stored
    "zip(name, items)", "(i for i in items)", "map(str, items)", "reversed(items)",
    "cfg.keys()", "[(i for i in items)]", "len", "str",
    # set orders that differ between processes
    "list({'a', 'b'})", "''.join({'a', 'b'})", "str({'a', 'b'})", "[x for x in {'a', 'b'}]",
    # identity is only exact against singletons
    "n is 7", "name is name",
    # locale-dependent formatting (the Guest's locale may differ)
    "f'{n:n}'", "format(ratio, 'n')", "'{:n}'.format(10**6)",
    # comprehension variables do not leak, and are local before assignment
    "[x for x in range(3)] and x", "[y for x in range(3) if y for y in range(x)]",
]  # fmt: skip


@pytest.mark.parametrize("source", NOT_KNOWN)
def test_not_known(source: str) -> None:
    with pytest.raises(NotKnown):
        ev(source)


def test_sets_are_used_only_where_their_order_cannot_show() -> None:
    """Set order depends on hashes and history: only order-free uses are computed."""
    for source in (
        "sorted(nums)",
        "len(nums)",
        "1.5 in nums",
        "min(nums)",
        "any(nums)",
        "set(nums)",
    ):
        assert_same(ev(source), cpython(source))
    assert_same(ev("sorted(ns)", {"ns": {3, 1, 2}}), [1, 2, 3])
    for source in ("list(nums)", "[x for x in nums]", "str(nums)", "sum(nums)", "sorted({1, 'a'})"):
        with pytest.raises(NotKnown):
            ev(source)
    assert ev("list({1})") == [1]


@pytest.mark.parametrize(
    "source",
    [
        "[nan] == [nan]", "nan in [nan]", "[nan].count(nan)", "(nan,).index(nan)",
        "{nan: 1}[nan]", "{nan: 1}.get(nan)", "{nan, nan}", "{nan: 1, nan: 2}",
        "sorted([(nan, 1), (nan, 0)])", "max([(nan,)])", "(nan, 1) < (nan, 2)",
    ],
)  # fmt: skip
def test_nan_where_identity_decides_is_not_known(source: str) -> None:
    """CPython compares container elements with `is` first; NaN identity is not knowable."""
    with pytest.raises(NotKnown):
        ev(source, {"nan": float("nan")})


def test_scalar_nan_is_computed() -> None:
    env = {"nan": float("nan")}
    assert ev("nan == nan", env) is False
    assert ev("nan != nan", env) is True
    assert repr(ev("[nan, 1.0]", env)) == "[nan, 1.0]"


def test_unknown_binding_gives_not_known_and_shadows_the_builtin() -> None:
    with pytest.raises(NotKnown):
        ev("len(name)", {"len": UNKNOWN, "name": "x"})
    with pytest.raises(NotKnown):
        ev("name", {"name": UNKNOWN})


def test_unknown_survives_copying() -> None:
    assert copy.deepcopy({"k": UNKNOWN})["k"] is UNKNOWN
    assert copy.copy(UNKNOWN) is UNKNOWN


def test_shadowing_value_is_not_the_builtin() -> None:
    assert ev("str", {"str": "a string"}) == "a string"
    with pytest.raises(NotKnown):
        ev("len('abc')", {"len": 3})
    assert ev("sorted", {"sorted": [1]}) == [1]


def test_comprehension_variable_shadows_env_only_inside() -> None:
    env = {"x": "outer"}
    assert ev("[x for x in range(2)] + [x]", env) == [0, 1, "outer"]
    # The first iterable is read in the enclosing scope, later ones in the comprehension.
    assert ev("[x for x in x]", env) == list("outer")


def test_result_never_aliases_env() -> None:
    env = {"cfg": {"tags": ["a"], "nested": ({"k": [1]},)}, "items": [1]}
    for source in (
        "cfg",
        "cfg['tags']",
        "cfg['nested']",
        "[cfg]",
        "items",
        "items[:]",
        "cfg.copy()",
    ):
        value = ev(source, env)
        _assert_no_shared_mutable(value, env)
    env_before = copy.deepcopy(env)
    ev("sorted(items) + list(cfg)", env)
    assert env == env_before


def _assert_no_shared_mutable(value: object, env: Mapping[str, object]) -> None:
    env_ids: set[int] = set()
    stack: list[object] = list(env.values())
    while stack:
        v = stack.pop()
        if isinstance(v, list | dict):
            env_ids.add(id(v))
        if isinstance(v, list | tuple):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
    stack = [value]
    while stack:
        v = stack.pop()
        assert not (isinstance(v, list | dict) and id(v) in env_ids)
        if isinstance(v, list | tuple):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.values())


def test_env_values_must_be_exactly_plain() -> None:
    class Str(str):
        def upper(self) -> str:  # pragma: no cover - must never run
            raise AssertionError("subclass method ran")

    with pytest.raises(NotKnown):
        ev("s.upper()", {"s": Str("x")})
    with pytest.raises(NotKnown):
        ev("xs[0] + 1", {"xs": [object()]})


def test_call_arguments_expand_star_and_double_star() -> None:
    call = expr("f(1, *items, k=n, **{'j': name})")
    assert isinstance(call, ast.Call)
    assert evaluate_call_arguments(call, ENV) == ((1, 3, 1, 2), {"k": 7, "j": "report"})


@pytest.mark.parametrize(
    "source",
    ["f(a=1, **{'a': 2})", "f(**{1: 2})", "f(**items)", "f(unknown)", "f(*n)", "f(*{'a', 'b'})"],
)
def test_call_arguments_not_known(source: str) -> None:
    call = expr(source)
    assert isinstance(call, ast.Call)
    with pytest.raises(NotKnown):
        evaluate_call_arguments(call, ENV)


def test_call_arguments_are_fresh() -> None:
    call = expr("f(cfg, tags=cfg['tags'])")
    assert isinstance(call, ast.Call)
    args, kwargs = evaluate_call_arguments(call, ENV)
    assert args == (ENV["cfg"],)
    assert args[0] is not ENV["cfg"]
    assert kwargs["tags"] is not ENV["cfg"]["tags"]  # type: ignore[index]


@pytest.mark.parametrize(
    ("source", "names"),
    [
        ("a + b.c(d)", {"a", "b", "d"}),
        ("[x + y for x in xs if z]", {"y", "xs", "z"}),
        ("[x for x in x]", {"x"}),
        ("{k: v for k, v in d.items()}", {"d"}),
        ("[y for x in a for y in x]", {"a"}),
        ("[[y for y in x] for x in a]", {"a"}),
        ("(lambda p, q=r: p + s)", {"r", "s"}),
        ("f'{a!r:{w}}'", {"a", "w"}),
        ("len(name)", {"len", "name"}),
        ("[a for a[i] in b]", {"a", "b", "i"}),
    ],
)
def test_free_names(source: str, names: set[str]) -> None:
    assert free_names(expr(source)) == frozenset(names)


def test_free_names_handles_any_depth() -> None:
    node: ast.expr = ast.Name("leaf", ast.Load())
    for _ in range(20_000):
        node = ast.UnaryOp(ast.USub(), node)
    assert free_names(node) == {"leaf"}


def test_the_walks_skip_only_leaves_without_children_and_keep_the_order() -> None:
    """``child_nodes``/``walk`` are ``ast.iter_child_nodes``/``ast.walk`` minus ``NAMELESS``
    nodes, in the same order, and a ``NAMELESS`` node never has a child (what makes
    skipping them exact), over every node of a real module."""
    tree = ast.parse(Path(ast.__file__).read_text(encoding="utf-8"))
    nodes = list(ast.walk(tree))
    assert sum(isinstance(n, NAMELESS) for n in nodes) > 1_000
    # What ast.py does not use (``child_nodes`` keeps a table of fields per node class).
    extra = (
        "import a.b as c\nfrom .d import e as f, g\nglobal h\n"
        "async def i(j, /, k=1, *l, m: int = 2, **n) -> None:\n"
        "    nonlocal o\n    async with p as (q, r):\n        async for s in t: await u\n"
        "    yield v; yield from w\n"
        "match x:\n    case [1, *rest] | {'k': y, **kw} if y: pass\n"
        "    case Point(x=0) as z: pass\n    case None | 'a' | -1: pass\n"
        "try:\n    pass\nexcept* (E, F) as g:\n    raise G from g\n"
        "del aa[bb:cc:dd], ee.ff\nassert gg, hh\nii: int = (jj := kk)\nll @= mm\n"
        "nn = f'{oo!r:>{pp}}' + b'q' + (lambda *rr, ss=1: rr)(*tt, **uu)\n"
        "vv = {ww: xx for ww in yy if ww} | {*zz} or not a1 and -a2 < a3 <= a4\n"
    )
    if sys.version_info >= (3, 12):
        extra += "type Alias[T] = list[T]\ndef generic[U: int, *V, **W](x: U) -> U: return x\n"
    for node in [*nodes, *ast.walk(ast.parse(extra))]:
        if isinstance(node, NAMELESS):
            assert list(ast.iter_child_nodes(node)) == []
        assert child_nodes(node) == [
            c for c in ast.iter_child_nodes(node) if not isinstance(c, NAMELESS)
        ]
    assert list(walk(tree)) == [n for n in nodes if n is tree or not isinstance(n, NAMELESS)]


def test_limits_are_configurable() -> None:
    small = Limits(max_str_len=5, max_container_len=3, max_int_bits=16, max_steps=50)
    assert ev("'ab' * 2", limits=small) == "abab"
    for source in ("'ab' * 3", "[0] * 4", "2 ** 16", "list(range(4))", "[i for i in range(40)]"):
        with pytest.raises(NotKnown):
            ev(source, limits=small)
