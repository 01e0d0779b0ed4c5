"""Batch fusion and projection pushdown end to end (in-process Guest): what applied, the
physical calls made, and equality with the unrewritten sequential run."""

from __future__ import annotations

import ast
from collections.abc import AsyncIterator
from types import SimpleNamespace

import anyio
import pytest

from pysolate import Host, LanePolicy, RunResult
from pysolate.passes import (
    Applied,
    BatchPolicy,
    NotApplicable,
    PassConfig,
    ProjectionPushdown,
    apply_source_passes,
)
from pysolate.passes.testing import LawfulFiles
from pysolate.testing import check_invariants, in_process_guest

pytestmark = pytest.mark.anyio

FILES = {f"f{i}": f"line {i}\nsecond {i}\nthird {i}\n" for i in range(12)}


async def chunks(source: str, size: int = 16) -> AsyncIterator[str]:
    for i in range(0, len(source), size):
        yield source[i : i + size]
        await anyio.sleep(0.001)


async def run_both(
    source: str,
    passes: PassConfig,
    *,
    files: LawfulFiles | None = None,
    policy: LanePolicy | None = None,
    invariants: bool = True,
) -> tuple[RunResult, RunResult, LawfulFiles, LawfulFiles]:
    fs = files or LawfulFiles(FILES, 0.02)
    host = Host(guest_factory=in_process_guest, passes=passes)
    host.register("fs", fs)
    streamed = await host.run_stream(chunks(source), policy=policy)
    if invariants:
        check_invariants(streamed, host.method_specs())
    ref_fs = LawfulFiles(FILES, 0.02)
    twin = Host(guest_factory=in_process_guest)
    twin.register("fs", ref_fs)
    reference = await twin.run_source(source, speculate=False)
    return streamed, reference, fs, ref_fs


def log(result: RunResult) -> list[tuple[object, ...]]:
    return [(c.method, c.args, c.kwargs, c.outcome, c.result, c.error) for c in result.calls]


def assert_same_outcome(a: RunResult, b: RunResult) -> None:
    assert (a.status, a.value, a.stdout, a.error) == (b.status, b.value, b.stdout, b.error)


LOOP = """paths = ["f0", "f1", "missing", "f2", "f3"]
texts = []
for p in paths:
    try:
        texts.append(fs.read_text(p))
    except FileNotFoundError as exc:
        texts.append(repr(exc))
texts
"""


async def test_batch_fusion_serves_each_occurrence_its_own_element() -> None:
    streamed, reference, fs, ref_fs = await run_both(
        LOOP, PassConfig(batch_fusion=BatchPolicy(max_wait=0.01))
    )
    assert_same_outcome(streamed, reference)
    assert log(streamed) == log(reference)  # per-element errors included
    assert fs.physical == [("read_many", ("f0", "f1", "missing", "f2", "f3"))]
    assert len(ref_fs.physical) == 5
    assert (streamed.report.physical, streamed.report.claimed) == (1, 5)
    [applied] = streamed.report.passes
    assert isinstance(applied, Applied) and applied.name == "capability_batch_fusion"
    assert "fs.read_text.batch@1" in applied.versions
    assert len({c.observation_id for c in streamed.calls}) == 5  # receipts stay per occurrence


async def test_batch_size_is_bounded() -> None:
    source = "[fs.read_text(f'f{i}') for i in range(10)]"
    streamed, reference, fs, _ = await run_both(
        source, PassConfig(batch_fusion=BatchPolicy(max_size=4, max_wait=0.01))
    )
    assert log(streamed) == log(reference)
    sizes = [len(arg) for method, arg in fs.physical if method == "read_many"]  # type: ignore[arg-type]
    assert max(sizes) <= 4 and sum(sizes) + sum(m == "read_text" for m, _ in fs.physical) == 10
    assert any(method == "read_many" for method, _ in fs.physical)
    assert streamed.report.physical == len(fs.physical)


async def test_a_failing_batch_falls_back_to_single_calls() -> None:
    fs = LawfulFiles(FILES, 0.02, batch_fails=True)
    config = PassConfig(batch_fusion=BatchPolicy(max_wait=0.01))
    # The failed batch call is one physical call more than the run's logical calls, which the
    # run-end invariant (physical <= logical + unclaimed early work) does not foresee.
    streamed, reference, _, _ = await run_both(LOOP, config, files=fs, invariants=False)
    assert log(streamed) == log(reference)
    assert fs.physical[0] == ("read_many", ("f0", "f1", "missing", "f2", "f3"))
    assert sorted(p for m, p in fs.physical[1:]) == sorted(["f0", "f1", "missing", "f2", "f3"])  # type: ignore[type-var]
    assert streamed.report.physical == 6
    [outcome] = streamed.report.passes
    assert isinstance(outcome, NotApplicable)


async def test_a_lone_call_is_not_batched() -> None:
    streamed, reference, fs, _ = await run_both(
        "fs.read_text('f1')", PassConfig(batch_fusion=BatchPolicy())
    )
    assert log(streamed) == log(reference)
    assert fs.physical == [("read_text", "f1")]
    [outcome] = streamed.report.passes
    assert isinstance(outcome, NotApplicable) and "fused" in outcome.reason


HEAD = """first = fs.read_text("f1").splitlines()[:2]
try:
    fs.read_text("missing").splitlines()[:1]
except FileNotFoundError as exc:
    print(exc)
whole = fs.read_text("f2")
[first, whole.splitlines()[:1]]
"""


async def test_pushdown_serves_a_projected_read_by_the_cheaper_call() -> None:
    streamed, reference, fs, _ = await run_both(HEAD, PassConfig(projection_pushdown=True))
    assert_same_outcome(streamed, reference)
    assert sorted(fs.physical) == [
        ("read_lines", "f1"),
        ("read_lines", "missing"),
        ("read_text", "f2"),
    ]
    # The receipts are the calls made; they differ from the reference's only by the law.
    for got, want in zip(streamed.calls, reference.calls, strict=True):
        if got.method == "read_lines":
            assert (want.method, want.args) == ("read_text", got.args[:1])
            limit = got.args[1]
            assert got.outcome == want.outcome and got.error == want.error
            if want.outcome == "ok":
                assert isinstance(want.result, str) and isinstance(limit, int)
                assert got.result == want.result.splitlines()[:limit]
        else:
            assert (got.method, got.args, got.result) == (want.method, want.args, want.result)
    assert all(c.lane == "claimed" for c in streamed.calls)  # early work matched the derived calls
    [applied] = streamed.report.passes
    assert isinstance(applied, Applied) and "2 site(s)" in applied.detail


def test_pushdown_keeps_error_lines() -> None:
    """An argument error inside a multi-line pushed-down call stays on its line."""
    source = "x = fs.read_text(\n    undefined_name,\n).splitlines()[:3]\n"
    host = Host()
    host.register("fs", LawfulFiles({}))
    declarations = {"fs": host.registration("fs").methods}
    derived = apply_source_passes(source, ast.parse(source), [ProjectionPushdown()], declarations)
    assert isinstance(derived.outcomes[0], Applied)
    assert derived.source == "x = fs.read_lines(\n    undefined_name,\n limit=3)\n"
    fake = SimpleNamespace(read_text=lambda *a, **k: "", read_lines=lambda *a, **k: [])
    for text in (source, derived.source):
        namespace: dict[str, object] = {"fs": fake}
        try:
            exec(compile(text, "<agent>", "exec"), namespace)
        except NameError as exc:
            assert exc.__traceback__ is not None
            tb = exc.__traceback__
            while tb.tb_next is not None:
                tb = tb.tb_next
            assert tb.tb_lineno == 2
        else:
            raise AssertionError("no NameError")


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("fs.read_text('f1').splitlines()[:-1]", "no capability call"),
        ("fs.read_text('f1').splitlines()[1:3]", "no capability call"),
        ("t = fs.read_text('f1')\nt.splitlines()[:2]", "no capability call"),
        ("fs.read_text('f1').splitlines()[:True]", "no capability call"),
        ("fs.read_many(['f1']).splitlines()[:2]", "declares no projection law"),
        ("fs = 1\nfs.read_text('f1').splitlines()[:2]", "may rebind 'fs'"),
        ("def f(fs):\n    return fs.read_text('f1').splitlines()[:2]", "may rebind 'fs'"),
        ("globals()\nfs.read_text('f1').splitlines()[:2]", "uses globals"),
        ("g = getattr\nfs.read_text('f1').splitlines()[:2]", "uses getattr"),
        ("import inspect\nfs.read_text('f1').splitlines()[:2]", "imports"),
        ("d = fs.__dict__\nfs.read_text('f1').splitlines()[:2]", "attribute __dict__"),
        ("a = {}\nfs.read_text(**a).splitlines()[:2]", "starred"),
        ("fs.read_text('f1', limit=2).splitlines()[:2]", "already passes 'limit'"),
        ("(fs.read_text('f1')\n .splitlines()[:2])", "spans lines"),
    ],
)
def test_pushdown_not_applicable(source: str, reason: str) -> None:
    host = Host()
    host.register("fs", LawfulFiles({}))
    declarations = {"fs": host.registration("fs").methods}
    derived = apply_source_passes(source, ast.parse(source), [ProjectionPushdown()], declarations)
    assert derived.source == source
    assert isinstance(derived.outcomes[0], NotApplicable) and reason in derived.outcomes[0].reason


async def test_passes_off_by_default_and_never_in_the_reference() -> None:
    streamed, reference, _, _ = await run_both(HEAD, PassConfig())
    assert log(streamed) == log(reference)
    assert streamed.report.passes == () and reference.report.passes == ()
    assert Host().passes is None


async def test_fold_end_to_end_equals_the_reference() -> None:
    source = "a = 6\nb = a * 7 - 2\nc = b + True\nc"
    streamed, reference, _, _ = await run_both(
        source, PassConfig(pure_scalar_fold=True, pure_scalar_cse=True)
    )
    assert_same_outcome(streamed, reference)
    assert [(o.name, o.applied) for o in streamed.report.passes] == [
        ("pure_scalar_fold", True),
        ("pure_scalar_cse", False),
    ]


async def test_a_batch_cancelled_in_flight_counts_one_physical_call() -> None:
    """The program raises while a batch call runs; the report counts the calls the tool saw."""
    source = "fs.read_text('missing').splitlines()[:2]\n" + LOOP
    fs = LawfulFiles(FILES, 0.05)
    streamed, reference, _, _ = await run_both(
        source, PassConfig(batch_fusion=BatchPolicy(), projection_pushdown=True), files=fs
    )
    assert_same_outcome(streamed, reference)
    assert streamed.error is not None and streamed.error.line == 1
    assert any(method == "read_many" for method, _ in fs.physical)
    assert streamed.report.physical == len(fs.physical)


async def test_the_sequential_reference_never_runs_a_pass() -> None:
    """``run_source(speculate=False)`` on a Host with every pass on runs the source as written."""
    fs = LawfulFiles(FILES)
    host = Host(
        guest_factory=in_process_guest,
        passes=PassConfig(True, True, True, BatchPolicy()),
    )
    host.register("fs", fs)
    result = await host.run_source(HEAD + "a = 2\nb = a * 3\n", speculate=False)
    assert result.report.passes == ()
    assert [m for m, _ in fs.physical] == ["read_text", "read_text", "read_text"]
