"""Workspace roots in the differential suite (issue 38): a git commit and a lazily read
directory holding the harness's ``FILES`` behave, for every generated program, exactly as
the in-memory root does. Each case runs on a seeded schedule on the mock clock
(``scheduled_pair``) once per root kind; every pair must pass the suite's checks
(0 divergences from its sequential reference), and the speculating runs of the three
kinds must be the same run: the same results, and the same early reads *claimed* (each
receipt's lane and the report's counts), so a git root's early reads are claimed exactly
as an in-memory root's are. The generated suite (``test_differential``) draws the root
kind too; ``pytest -m soak`` runs ``SOAK_PROGRAMS`` here.
"""

from __future__ import annotations

import dataclasses

import pytest
from example_counts import DIFFERENTIAL, examples
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pysolate import LanePolicy, RunResult
from pysolate.testing import observable

from .harness import check_pair, scheduled_pair
from .programs import ROOTS, Conditions, conditions, programs

DEFAULT_PROGRAMS = examples(25, full=60)
"""Cases of the default run (each runs three pairs, one per root kind)."""

SOAK_PROGRAMS = 2_000
"""Cases of the ``soak`` run."""

READS = (
    "names = workspace.list_dir('d')\n"
    "texts = [workspace.read_text('d/' + n) for n in names]\n"
    "a = workspace.read_text('a.txt')\n"
    "workspace.write_text('a.txt', a + '!')\n"
    "b = workspace.read_text('b.txt')\n"
    "a2 = workspace.read_text('a.txt')\n"
    "[names, texts, a, b, a2, workspace.exists('missing.txt')]\n"
)
SLOW = Conditions(
    chunk_sizes=(5,),
    pauses=(0.01,),
    latencies={"workspace": 0.002},
    failing=frozenset({"bad"}),
    policy=LanePolicy(concurrency=8, budget=64),
)


def _claims(result: RunResult) -> tuple[object, ...]:
    report = result.report
    lanes = tuple((c.capability, c.method, c.lane) for c in result.calls)
    return lanes, report.claimed, report.direct, report.physical, report.logical


def _same_run_on_every_root(source: str, case: Conditions, seed: int) -> list[RunResult]:
    runs = []
    for kind in ROOTS:
        pair = scheduled_pair(source, dataclasses.replace(case, root=kind), seed)
        check_pair(pair)
        runs.append(pair.speculative)
    memory = runs[0]
    for kind, run in zip(ROOTS[1:], runs[1:], strict=True):
        assert observable(run) == observable(memory), f"{kind} root: results differ\n{source}"
        assert _claims(run) == _claims(memory), f"{kind} root: claims differ\n{source}"
    return runs


def test_early_reads_on_a_git_root_are_claimed_as_on_a_memory_root() -> None:
    """A program whose reads all stream early: the git and lazy roots claim them too."""
    runs = _same_run_on_every_root(READS, SLOW, seed=0)
    assert all(r.status == "ok" for r in runs)
    assert all(
        r.report.claimed == r.report.logical == 8 for r in runs
    )  # every call claimed, on every root


@settings(DIFFERENTIAL, max_examples=DEFAULT_PROGRAMS)
@given(programs(), conditions(), st.integers(0, 2**32 - 1))
@example(READS, SLOW, 1)
def test_generated_programs_run_alike_on_every_root(
    source: str, case: Conditions, seed: int
) -> None:
    _same_run_on_every_root(source, case, seed)


@pytest.mark.soak
@settings(DIFFERENTIAL, max_examples=SOAK_PROGRAMS)
@given(programs(max_statements=12), conditions(), st.integers(0, 2**32 - 1))
def test_soak_every_root(source: str, case: Conditions, seed: int) -> None:
    _same_run_on_every_root(source, case, seed)
