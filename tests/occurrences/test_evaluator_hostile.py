"""Hostile expressions: each gives NotKnown, runs nothing, and costs a bounded number of steps.

Cost is asserted through the evaluator's own step meter (never the wall clock): a spy
`Budget` records the steps each evaluation spent, and every refusal here must come long
before the budget is exhausted, i.e. from a size check made *before* computing.
"""

from __future__ import annotations

import ast
import sys
import time
from collections.abc import Mapping

import pytest

import occurrences.evaluator._walker as walker_module
from occurrences import UNKNOWN, Limits, NotKnown, evaluate
from occurrences.evaluator._budget import Budget


class SpyBudget(Budget):
    """A Budget that remembers the most steps any evaluation spent."""

    __slots__ = ()
    peak = 0

    def charge(self, n: int = 1) -> None:
        super().charge(n)
        SpyBudget.peak = max(SpyBudget.peak, self.steps)


@pytest.fixture(autouse=True)
def spy(monkeypatch: pytest.MonkeyPatch) -> type[SpyBudget]:
    SpyBudget.peak = 0
    monkeypatch.setattr(walker_module, "Budget", SpyBudget)
    return SpyBudget


class Tripwire:
    """Flips `Tripwire.fired` if any of its behaviour is ever invoked."""

    fired = False

    def _fire(self, *args: object, **kwargs: object) -> object:
        Tripwire.fired = True
        raise AssertionError("host code ran")

    __add__ = __radd__ = __mul__ = __rmul__ = __mod__ = __rmod__ = __pow__ = _fire
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __contains__ = _fire  # type: ignore[assignment]
    __str__ = __repr__ = __format__ = __len__ = __iter__ = __bool__ = __index__ = _fire  # type: ignore[assignment]
    __getitem__ = __call__ = __getattr__ = __neg__ = __int__ = __float__ = _fire

    def __hash__(self) -> int:
        return 0  # dict keys in the fixture need it; hashing itself runs no evaluator code

    def upper(self) -> str:
        return str(self._fire())


class TripStr(str):
    """A str subclass: exactness forbids trusting its (overridden) methods."""

    def upper(self) -> str:
        Tripwire.fired = True
        raise AssertionError("subclass method ran")

    def __add__(self, other: object) -> str:
        Tripwire.fired = True
        raise AssertionError("subclass operator ran")


def ev(source: str, env: Mapping[str, object] | None = None) -> object:
    return evaluate(ast.parse(source, mode="eval").body, env or {})


QUICK = Limits().max_steps // 2
"""A refusal by a size check comes well before the step budget (200,000) runs out; the
steps spent are those of building the operands, e.g. 10,000 for `[0] * 10_000`."""


def refused_by_a_bound(exc: pytest.ExceptionInfo[NotKnown]) -> bool:
    return "step budget" not in str(exc.value)


HUGE = [
    "'a' * 10**10", "10**10 * 'a'", "b'a' * 10**10", "[0] * 10**9", "(0,) * 10**9",
    "'ab' * 600_000", "10**10**10", "2**(2**40)", "pow(2, 2**40)", "9**9**9", "1 << 10**9",
    "(10**2000) * (10**2000) * (10**2000)", "'x'.ljust(10**10)", "'x'.center(10**10)",
    "'x'.zfill(10**10)", "b'x'.rjust(10**10)", "'a\\t'.expandtabs(10**9)",
    "('a' * 1000).replace('', 'x' * 1000)", "('a' * 1000).replace('a', 'b' * 10_000)",
    "''.join(['a' * 100_000] * 100)", "list(range(10**12))", "sum(range(10**12))",
    "[i for i in range(10**12)]", "sorted(range(10**12))", "set(range(10**12))",
    "str(10**5000)", "int('9' * 100_000)", "float('1' * 100_000)", "f'{1:{10**10}}'",
    "f'{1:>99999999999}'", "'%099999999999d' % 1", "'%*d' % (10**9, 1)", "format(1, '10000000000')",
    "round(7, -10**9)", "('{0}' * 1000).format('a' * 10_000)",
    "('{:>999999}' * 2).format(1, 2)", "('%(a)s' * 1000) % {'a': 'x' * 10_000}",
    "'%(a(b))999999999s' % {'a(b)': 1}", "('%999999d' * 2) % (1, 2)", "'{:{}}'.format(1, 10**9)",
    "'%.999999f%.999999f' % (1.0, 2.0)", "[[0] * 10_000] * 10_000 == [[0] * 10_000] * 10_000",
    "str([[0] * 10_000] * 10_000)", "len(str(['a' * 10**6] * 10))", "[['x' * 10**6] * 10]",
    "(('a' * 999_999) + 'bb')", "{('a' * 10**6,) * 10_000: 1}",
]  # fmt: skip


@pytest.mark.parametrize("source", HUGE)
def test_huge_results_are_refused_before_computing(source: str, spy: type[SpyBudget]) -> None:
    with pytest.raises(NotKnown) as exc:
        ev(source)
    assert refused_by_a_bound(exc)
    assert spy.peak <= QUICK


WORK = [
    "[(i, j) for i in range(10_000) for j in range(10_000)]",
    "sum(i * j for i in range(10_000) for j in range(10_000))",
    "[x for x in 'a' * 1_000_000]", "any(c == 'b' for c in 'a' * 1_000_000)",
    "[[y for y in range(x)] for x in range(5_000)]", "sorted([str(i) for i in range(9_000)] * 1)",
]  # fmt: skip


@pytest.mark.parametrize("source", WORK)
def test_long_work_stops_at_the_step_budget(source: str, spy: type[SpyBudget]) -> None:
    with pytest.raises(NotKnown):
        ev(source)
    assert spy.peak <= Limits().max_steps + Limits().max_container_len


def nested(depth: int, make: type[ast.expr] | None = None) -> ast.expr:
    node: ast.expr = ast.Constant(1)
    for _ in range(depth):
        node = ast.UnaryOp(ast.USub(), node) if make is None else ast.List([node], ast.Load())
    return node


@pytest.mark.parametrize("make", [None, ast.List])
def test_deep_nesting_is_refused_not_a_recursion_error(
    make: type[ast.expr] | None, spy: type[SpyBudget]
) -> None:
    for depth in (10_000, sys.getrecursionlimit() * 3):
        with pytest.raises(NotKnown):
            evaluate(nested(depth, make), {})
    assert spy.peak <= QUICK
    assert evaluate(nested(50, make), {}) is not None


def chain(terms: int) -> ast.expr:
    node: ast.expr = ast.Constant("a")
    for _ in range(terms - 1):
        node = ast.BinOp(node, ast.Add(), ast.Constant("a"))
    return node


def test_long_operator_chain_is_refused_cheaply(spy: type[SpyBudget]) -> None:
    with pytest.raises(NotKnown):
        evaluate(chain(5_000), {})
    assert spy.peak <= 1_000
    assert evaluate(chain(150), {}) == "a" * 150


ESCAPES = [
    "().__class__.__bases__[0].__subclasses__()", "''.__class__.__mro__[1].__subclasses__()",
    "__import__('os').system('true')", "__builtins__", "__builtins__['eval']('1')",
    "getattr(name, 'upper')()", "getattr(0, '__class__')", "eval('1')", "exec('x = 1')",
    "compile('1', 'f', 'eval')", "open('/etc/passwd').read()", "globals()", "locals()",
    "vars()", "dir()", "type(name)", "type(name).__subclasses__(type(name))", "object()",
    "breakpoint()", "help()", "setattr(name, 'x', 1)", "delattr(name, 'x')",
    "name.upper.__self__", "name.upper().__class__", "name.__class__", "name.__len__()",
    "name.__getattribute__('upper')", "(lambda: __import__('os'))()", "[].__class__.__base__",
    "'{0.__class__}'.format(name)", "'{0.__class__.__mro__}'.format(1)", "'{x[0]}'.format(x=name)",
    "'{}'.format_map(cfg)", "format(name, '{0.__class__}')", "f'{name.__class__}'",
    "f'{(lambda: name.__class__)()}'", "(lambda f: f.__globals__)(len)", "'%(__class__)s' % cfg", "str.format('{0.__class__}', 1)",
    "name.encode('rot13')", "b'x'.decode('hex_codec')", "name.encode('utf-16')",
    "[f for f in [getattr]]", "{k: eval for k in 'a'}", "(x := __import__('os'))",
    "memoryview(b'x')", "bytearray(10)", "super()", "classmethod(len)", "name._private()",
]  # fmt: skip


@pytest.mark.parametrize("source", ESCAPES)
def test_escapes_are_not_known(source: str, spy: type[SpyBudget]) -> None:
    env = {"name": "x", "cfg": {"a": 1}}
    with pytest.raises(NotKnown):
        ev(source, env)
    assert spy.peak <= QUICK


TOUCH = [
    "trip", "trip + 1", "1 + trip", "trip * 2", "'%s' % trip", "'%s' % (trip,)", "f'{trip}'",
    "f'{trip!r}'", "str(trip)", "repr(trip)", "len(trip)", "trip == 1", "1 == trip", "trip in [1]",
    "1 in trip", "[x for x in trip]", "sorted([trip, trip])", "trip.upper()", "trip[0]",
    "trip(1)", "-trip", "int(trip)", "bool(trip)", "not trip", "trip if trip else 1",
    "trip and 1", "[trip]", "{trip: 1}", "{trip}", "holder", "holder[0]", "holder[0] + 1",
    "str(holder)", "keyed", "len(keyed)", "keyed.get(1)", "sub.upper()", "sub + 'x'", "sub",
    "[sub]", "list(sub)", "'x' in sub", "max(holder)", "''.join(holder)", "format(trip, '')",
    "isinstance(trip, str)", "list(map(str, holder))", "sum(holder)", "holder == holder",
]  # fmt: skip


@pytest.mark.parametrize("source", TOUCH)
def test_non_plain_env_values_run_nothing(source: str) -> None:
    """A value whose exact type is not plain is never operated on, not even via a subclass."""
    Tripwire.fired = False
    trip = Tripwire()
    env = {"trip": trip, "holder": [1, trip], "keyed": {trip: 1}, "sub": TripStr("s")}
    with pytest.raises(NotKnown):
        ev(source, env)
    assert not Tripwire.fired


@pytest.mark.parametrize("builtin", ["len", "str", "sorted", "range", "print", "open", "eval"])
def test_shadowed_builtin_is_never_the_builtin(builtin: str) -> None:
    with pytest.raises(NotKnown):
        ev(f"{builtin}('abc')", {builtin: UNKNOWN})
    with pytest.raises(NotKnown):
        ev(f"{builtin}('abc')", {builtin: "a value"})
    assert ev(builtin, {builtin: "a value"}) == "a value"


def test_env_is_never_mutated() -> None:
    items = [3, 1, 2]
    cfg = {"k": [1], "j": {"x": 1}}
    env: dict[str, object] = {"items": items, "cfg": cfg}
    for source in (
        "items.sort()", "items.append(4)", "items.reverse()", "items.pop()", "items.clear()",
        "cfg.update(a=1)", "cfg.pop('k')", "cfg.setdefault('z', 1)", "cfg['k'].append(2)",
        "cfg.popitem()", "cfg['j'].clear()", "items.extend([1])", "items.insert(0, 1)",
        "items.remove(1)", "items.__setitem__(0, 9)", "items.__iadd__([1])",
    ):  # fmt: skip
        with pytest.raises(NotKnown):
            ev(source, env)
    assert items == [3, 1, 2]
    assert cfg == {"k": [1], "j": {"x": 1}}


@pytest.mark.parametrize(
    "node",
    [
        ast.Lambda(ast.arguments([], [], None, [], [], None, []), ast.Constant(1)),
        ast.NamedExpr(ast.Name("x", ast.Store()), ast.Constant(1)),
        ast.Await(ast.Constant(1)),
        ast.Yield(ast.Constant(1)),
        ast.YieldFrom(ast.Constant(1)),
        ast.Starred(ast.Constant(1), ast.Load()),
        ast.Constant(Tripwire()),  # type: ignore[arg-type]
        ast.Constant(1j),
        ast.Constant(...),
        ast.Name(Tripwire(), ast.Load()),  # type: ignore[arg-type]
        ast.Attribute(ast.Constant("s"), "upper", ast.Load()),
        ast.Call(ast.Attribute(ast.Constant("s"), Tripwire(), ast.Load()), [], []),  # type: ignore[arg-type]
        ast.FormattedValue(ast.Constant(1), Tripwire(), None),  # type: ignore[arg-type]
        ast.Module([], []),
    ],
)
def test_unsupported_or_malformed_nodes_are_not_known(node: ast.expr) -> None:
    Tripwire.fired = False
    with pytest.raises(NotKnown):
        evaluate(node, {})
    assert not Tripwire.fired


COLLIDING = [
    "{k * (2**61 - 1): 0 for k in range(10_000)}",
    "{k * (2**61 - 1) for k in range(10_000)}",
    "set([k * (2**61 - 1) for k in range(10_000)])",
    "dict([(k * (2**61 - 1), 0) for k in range(10_000)])",
    "{(k * (2**61 - 1),): 0 for k in range(10_000)}",
    "{**{k * (2**61 - 1): 0 for k in range(20)}, **{(k + 20) * (2**61 - 1): 0 for k in range(20)}}",
]  # fmt: skip


@pytest.mark.parametrize("source", COLLIDING)
def test_colliding_keys_are_refused_before_a_dict_or_set_is_built(source: str) -> None:
    """Keys of one hash (``k * (2**61 - 1)`` are all 0) cost CPython a probe of each other
    per insertion: 10,000 of them held the Host's loop for seconds while the argument was
    evaluated. More than ``MAX_EQUAL_HASHES`` of one hash are refused, in linear time: the
    refusal costs what building the keys cost: steps and CPU time grow 10x for 10x the keys
    (with room for noise; building the dict first grows 100x)."""
    spent, seconds = [], []
    for scale in ("", "0"):
        SpyBudget.peak = 0
        best = float("inf")
        for _ in range(3):
            t0 = time.process_time()
            with pytest.raises(NotKnown, match="keys of one hash"):
                ev(source.replace("range(10_000)", f"range(1_000{scale})"))
            best = min(best, time.process_time() - t0)
        spent.append(SpyBudget.peak)
        seconds.append(best)
    assert spent[1] <= 12 * spent[0]
    assert seconds[1] <= 30 * max(seconds[0], 1e-3)
