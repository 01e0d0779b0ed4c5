"""Differential runs with the passes on: the run equals the unrewritten sequential run.

Programs are generated to exercise each pass (issue 9): closed scalar programs that fold
or share subexpressions, ones that leave int64 or use an unsupported construct (the pass
must decline, and any error keep its line), loops and comprehensions of reads with a batch
law (some paths missing: per-element errors), and reads used only through a declared
projection. The general programs of ``programs.py`` also run with every pass on, where
they mostly do not apply.

Property: status, value, stdout, error (type, message, line), workspace, and the call log
equal the sequential reference's (``run_source(speculate=False)``, no passes). The one
documented exception is a pushed-down call: its receipt is the cheaper call the Guest made,
and it must match the reference's receipt by the declared law (same path, result the
projection of the reference's result, or the same error); see docs/passes.md.
"""

from __future__ import annotations

import anyio
import pytest
from example_counts import DIFFERENTIAL, examples
from hypothesis import Phase, find, given, settings
from hypothesis import strategies as st

from pysolate import Effect, Host, LanePolicy, RunResult, capability
from pysolate._guest import start_subprocess_guest
from pysolate._guest_api import GuestFactory
from pysolate._report._equivalence import same
from pysolate.passes import BatchPolicy, PassConfig
from pysolate.passes.testing import LawfulFiles
from pysolate.testing import check_invariants, in_process_guest, observable

from .harness import TimedChunks, build_host
from .programs import Conditions, conditions, programs

ALL = PassConfig(
    projection_pushdown=True,
    pure_scalar_fold=True,
    pure_scalar_cse=True,
    batch_fusion=BatchPolicy(max_size=4, max_wait=0.003),
)
"""Every pass on, with small batches so batches fill and split."""

FILES = {"a": "one\ntwo\nthree\n", "b": "", "c": "x\r\ny\n\nz", "d": "single"}
PATHS = ("a", "b", "c", "d", "missing")

QUIET_CASE = Conditions(
    (7,), (0.0,), {"docs.search": 0.002}, frozenset({"bad"}), LanePolicy(allow_discardable=True)
)
"""Small chunks and short reads: what the coverage and mutation checks run under."""

PROGRAMS = examples(60, full=120)
"""Generated scalar programs per default run (in-process Guest)."""

READ_PROGRAMS = examples(40, full=80)
"""Generated read programs per default run (each streams with tool latency)."""

SUBPROCESS_PROGRAMS = examples(6, full=12)
"""Generated programs of either kind run through the subprocess Guest (slower start-up)."""

GENERAL_PROGRAMS = examples(20, full=40)
"""Generated issue-6 programs (no laws for the passes to use) run with every pass on."""


@st.composite
def scalar_programs(draw: st.DrawFn) -> str:
    """Closed scalar programs, sometimes broken by one construct the passes must refuse."""
    names: list[str] = []
    lines: list[str] = []
    big = st.sampled_from((2**31, 2**62, 2**63 - 1))
    leaf = st.one_of(st.integers(-9, 9), st.integers(-9, 9), st.integers(-9, 9), st.booleans(), big)

    def expr(depth: int) -> str:
        options = [repr(draw(leaf)), *names]
        if depth < 3 and draw(st.booleans()):
            op = draw(st.sampled_from(("+", "-", "*")))
            return f"({expr(depth + 1)} {op} {expr(depth + 1)})"
        if depth < 3 and draw(st.integers(0, 5)) == 0:
            return f"-{expr(depth + 1)}"
        return draw(st.sampled_from(options))

    for i in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(("assign", "assign", "repeat", "aug", "expr")))
        if kind == "aug" and names:
            lines.append(
                f"{draw(st.sampled_from(names))} {draw(st.sampled_from(('+=', '-=', '*=')))} {expr(1)}"
            )
        elif kind == "repeat" and names:
            shared = expr(1)
            first, second = f"v{i}", f"w{i}"
            lines += [f"{first} = {shared}", f"{second} = {shared} + 1"]
            names += [first, second]
        elif kind == "expr":
            lines.append(expr(0))
        else:
            lines.append(f"v{i} = {expr(0)}")
            names.append(f"v{i}")
    twist = draw(st.sampled_from(("none", "none", "none", "unbound", "pow", "print", "call")))
    at = draw(st.integers(0, len(lines)))
    extra = {
        "unbound": "z = undefined_name + 1",
        "pow": "z = 3 ** 2",
        "print": "print('side effect')",
        "call": "z = abs(-3)",
    }.get(twist)
    if extra is not None:
        lines.insert(at, extra)
    lines.append(draw(st.sampled_from(names)) if names else "0")
    return "\n".join(lines) + "\n"


@st.composite
def read_programs(draw: st.DrawFn) -> str:
    """Reads of ``fs`` that batch fusion and projection pushdown apply to (or nearly)."""
    lines: list[str] = []
    made: list[str] = []
    for i in range(draw(st.integers(1, 5))):
        kind = draw(
            st.sampled_from(("loop", "comprehension", "head", "head_try", "whole", "near_miss"))
        )
        path = repr(draw(st.sampled_from(PATHS)))
        paths = draw(st.lists(st.sampled_from(PATHS), min_size=1, max_size=6))
        n = draw(st.integers(0, 4))
        name = f"r{i}"
        if kind == "loop":
            lines += [
                f"{name} = []",
                f"for p in {paths!r}:",
                "    try:",
                f"        {name}.append(fs.read_text(p))",
                "    except FileNotFoundError as exc:",
                f"        {name}.append(str(exc))",
            ]
        elif kind == "comprehension":
            safe = [p for p in paths if p != "missing"] or ["a"]
            lines.append(f"{name} = [fs.read_text(p) for p in {safe!r}]")
        elif kind == "head":
            lines.append(f"{name} = fs.read_text({path}).splitlines()[:{n}]")
        elif kind == "head_try":
            lines += [
                "try:",
                f"    {name} = fs.read_text({path}).splitlines()[:{n}]",
                "except OSError as exc:",
                f"    {name} = type(exc).__name__",
            ]
        elif kind == "whole":
            lines += [
                "try:",
                f"    {name} = fs.read_text({path})",
                "except OSError:",
                f"    {name} = None",
            ]
        else:  # the projection shape, but not the declared one: nothing may be pushed down
            lines += [
                "try:",
                f"    {name} = fs.read_text({path}).splitlines()[{n}:]",
                "except OSError:",
                f"    {name} = None",
            ]
        made.append(name)
    if draw(st.booleans()):
        lines.append(f"print({made[0]})")
    lines.append(f"[{', '.join(made)}]")
    return "\n".join(lines) + "\n"


def lawful_host(
    conditions: Conditions, passes: PassConfig | None, factory: GuestFactory = in_process_guest
) -> tuple[Host, LawfulFiles]:
    host, _ = build_host(conditions, factory, passes=passes)
    files = LawfulFiles(FILES, latency=conditions.latencies.get("docs.search", 0.0))
    host.register("fs", files)
    return host, files


async def pair(
    source: str, case: Conditions, factory: GuestFactory = in_process_guest
) -> tuple[RunResult, RunResult, Host]:
    ref_host, _ = lawful_host(case, None, factory)
    reference = await ref_host.run_source(source, speculate=False)
    host, _ = lawful_host(case, ALL, factory)
    streamed = await host.run_stream(
        TimedChunks(source, case.chunk_sizes, case.pauses), policy=case.policy
    )
    return streamed, reference, host


def assert_equal_by_law(source: str, streamed: RunResult, reference: RunResult) -> None:
    """Equal observables; a pushed-down receipt matches its reference receipt by the law."""
    got, want = observable(streamed), observable(reference)
    for name in ("status", "value", "stdout", "error", "workspaces"):
        assert same(got[name], want[name]), (
            f"{name} differs\n{source}\n{got[name]!r}\n{want[name]!r}"
        )
    assert len(streamed.calls) == len(reference.calls), f"call counts differ\n{source}"
    for g, w in zip(streamed.calls, reference.calls, strict=True):
        if (g.capability, g.method) == ("fs", "read_lines"):
            limit = g.args[1] if len(g.args) > 1 else g.kwargs["limit"]
            assert (w.capability, w.method, w.args) == ("fs", "read_text", g.args[:1]), source
            assert (g.outcome, g.error) == (w.outcome, w.error), source
            if w.outcome == "ok":
                assert isinstance(w.result, str) and isinstance(limit, int)
                assert g.result == w.result.splitlines()[:limit], source
            continue
        assert (g.capability, g.method, g.args, g.kwargs, g.outcome, g.result, g.error) == (
            w.capability,
            w.method,
            w.args,
            w.kwargs,
            w.outcome,
            w.result,
            w.error,
        ), f"receipt {g.index} differs\n{source}"


def check(
    source: str, case: Conditions, factory: GuestFactory = in_process_guest
) -> tuple[RunResult, RunResult]:
    streamed, reference, host = anyio.run(pair, source, case, factory)
    assert_equal_by_law(source, streamed, reference)
    check_invariants(streamed, host.method_specs())
    return streamed, reference


@settings(DIFFERENTIAL, max_examples=PROGRAMS)
@given(scalar_programs(), conditions())
def test_scalar_passes_equal_the_unrewritten_run(source: str, case: Conditions) -> None:
    """Fold and CSE (or their refusal) never change value, stdout or error line."""
    check(source, case)


@settings(DIFFERENTIAL, max_examples=READ_PROGRAMS)
@given(read_programs(), conditions())
def test_read_passes_equal_the_unrewritten_run(source: str, case: Conditions) -> None:
    """Batch fusion and pushdown: same outcome; same log, pushed-down receipts by the law."""
    check(source, case)


@settings(DIFFERENTIAL, max_examples=SUBPROCESS_PROGRAMS)
@given(st.one_of(read_programs(), scalar_programs()), conditions())
def test_passes_through_the_subprocess_guest(source: str, case: Conditions) -> None:
    """A sample through the isolated subprocess Guest (derived source, real broker)."""
    check(source, case, start_subprocess_guest)


@settings(DIFFERENTIAL, max_examples=GENERAL_PROGRAMS)
@given(programs(max_statements=6), conditions())
def test_general_programs_with_every_pass_on(source: str, case: Conditions) -> None:
    """The issue-6 programs (no laws to use) are untouched by the passes."""
    streamed, _ = check(source, case)
    assert all(not o.applied or o.name.startswith("pure_scalar") for o in streamed.report.passes)


@pytest.mark.parametrize(
    ("strategy", "name"),
    [
        (scalar_programs(), "pure_scalar_fold"),
        (scalar_programs(), "pure_scalar_cse"),
        (read_programs(), "capability_projection_pushdown"),
        (read_programs(), "capability_batch_fusion"),
    ],
)
def test_the_generators_exercise_every_pass(strategy: st.SearchStrategy[str], name: str) -> None:
    """Some generated program applies each pass (else the properties above would be empty)."""

    def applies(source: str) -> bool:
        streamed, _ = check(source, QUIET_CASE)
        return any(o.name == name and o.applied for o in streamed.report.passes)

    # Generation only: the first program that applies the pass is enough (no shrinking).
    find(
        strategy,
        applies,
        settings=settings(database=None, derandomize=True, phases=[Phase.generate]),
    )


def test_the_comparison_catches_a_wrong_batch_law() -> None:
    """Mutation check: a batch method answering in the wrong order makes the check fail."""

    class Reversed(LawfulFiles):
        @capability(effect=Effect.IMMUTABLE_READ, version="1")
        async def read_many(self, paths: list[str]) -> list[object]:
            return list(reversed(await super().read_many(paths)))

    source = "[fs.read_text(p) for p in ['a', 'd']]\n"
    case = QUIET_CASE

    async def run() -> tuple[RunResult, RunResult]:
        ref_host, _ = lawful_host(case, None)
        reference = await ref_host.run_source(source, speculate=False)
        host, _ = build_host(case, in_process_guest, passes=ALL)
        host.register("fs", Reversed(FILES))
        return await host.run_stream(TimedChunks(source, (100,), (0.0,))), reference

    streamed, reference = anyio.run(run)
    try:
        assert_equal_by_law(source, streamed, reference)
    except AssertionError:
        return
    raise AssertionError("a wrong batch law went unnoticed")
