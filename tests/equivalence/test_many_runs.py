"""Many runs on one Host (issue 40): each equals its own sequential run while they share work.

K generated programs (``programs``: overlapping reads, failing ones, branch writes) stream at
once on one Host whose observation table shares physical calls by exact key; some read one
frozen root and some another, some are cancelled mid-stream (``many``). Property: every run
that finished equals its own ``run_source(speculate=False)`` on a fresh Host, keeps the
accounting invariants, and no run made a live read or an unknown call before its program
was complete. The default run is derandomized; ``pytest -m soak`` runs 1,000 more sets.
Mutants that share what contract 8 forbids are caught in ``test_mutations.py``.
"""

from __future__ import annotations

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pysolate import LanePolicy
from pysolate._guest import start_subprocess_guest

from .many import ROOTS, Plan, check_many, many_differential, run_many
from .programs import Conditions, conditions, programs

MANY_SETS = 12
"""Sets of concurrent runs the default (CI) run executes through the in-process Guest."""

MANY_SUBPROCESS_SETS = 3
"""Sets through the isolated subprocess Guest."""

SOAK_SETS = 1_000
"""Sets of the ``soak`` run."""

_CI = settings(
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


OPENING_READS = (
    "docs.fetch('alpha')",
    "docs.fetch('beta')",
    "docs.search('alpha')",
    "docs.search('gamma')",
    "workspace.read_text('a.txt')",
    "workspace.list_dir('d')",
)
"""Reads the runs of a set may open with, as best-of-N variants of one task do."""


@st.composite
def plans(draw: st.DrawFn, max_runs: int = 5, max_statements: int = 6) -> list[Plan]:
    """2 to ``max_runs`` runs opening with the same few reads (``OPENING_READS``; in half
    the sets after writing a file of their own branch and reading it back: two runs'
    branches then have equal views of different contents): three in four then run one
    common program, the rest draw their own (overlapping calls either
    way: the pools are small); each on a root of ``ROOTS``, one in four cancelled after a
    few chunks."""
    reads = draw(st.lists(st.sampled_from(OPENING_READS), max_size=3))
    opening = "".join(f"o{i} = {read}\n" for i, read in enumerate(reads))
    own = draw(st.booleans())  # each run first writes a file of its own branch and reads it back
    common = draw(programs(max_statements=max_statements))
    out = []
    for n in range(draw(st.integers(2, max_runs))):
        mine = (
            f"workspace.write_text('a.txt', 'variant {n}')\nmine = workspace.read_text('a.txt')\n"
            if own
            else ""
        )
        source = (
            mine
            + opening
            + (common if draw(st.integers(0, 3)) else draw(programs(max_statements=max_statements)))
        )
        cancel = draw(st.integers(0, 8)) if draw(st.integers(0, 3)) == 0 else None
        out.append(Plan(source, draw(st.sampled_from(ROOTS)), draw(conditions()), cancel))
    return out


@settings(_CI, max_examples=MANY_SETS)
@given(plans(), conditions())
def test_concurrent_runs_on_one_sharing_host_each_equal_their_sequential_run(
    sets: list[Plan], case: Conditions
) -> None:
    many_differential(sets, case)


@settings(_CI, max_examples=MANY_SUBPROCESS_SETS)
@given(plans(max_runs=3, max_statements=4), conditions())
def test_concurrent_runs_through_the_subprocess_guest(sets: list[Plan], case: Conditions) -> None:
    many_differential(sets, case, start_subprocess_guest)


@pytest.mark.soak
@settings(_CI, max_examples=SOAK_SETS)
@given(plans(max_runs=8, max_statements=10), conditions())
def test_soak_many_runs(sets: list[Plan], case: Conditions) -> None:
    """1,000 sets of up to eight runs: only with ``-m soak``."""
    many_differential(sets, case)


_SLOW = Conditions(
    chunk_sizes=(9,),
    pauses=(0.002,),
    latencies={"docs.search": 0.05, "docs.fetch": 0.05},
    failing=frozenset({"bad"}),
    policy=LanePolicy(),
)

_READS = "a = docs.search('alpha')\nb = docs.fetch('beta')\ntry:\n    c = docs.search('bad')\nexcept LookupError:\n    c = 0\n[a, b, c]\n"


def test_identical_runs_make_one_physical_call_per_key_and_root() -> None:
    """Eight runs of one program, half on each root: ``search`` (pure) is called once for
    all, ``fetch`` once per root; the failing ``search`` is not handed on (each run that
    waited on a failure makes its own call), and every run still equals its own."""
    sets = [Plan(_READS, ROOTS[i % 2], _SLOW) for i in range(8)]
    runs, host = many_differential(sets, _SLOW)
    stats = host.share_statistics()
    docs = host.registration("docs").obj
    physical = docs.physical  # type: ignore[attr-defined]
    assert [p for p in physical if p[:2] == ("search", "alpha")] == [("search", "alpha", "")]
    assert sorted(p for p in physical if p[0] == "fetch") == [
        ("fetch", "beta", "r1"),
        ("fetch", "beta", "r2"),
    ]
    failures = [p for p in physical if p[1] == "bad"]
    assert 1 <= len(failures) <= 8 and stats.failed >= 1
    assert len(physical) <= 3 + len(failures)  # physical <= distinct keys + failures
    assert (
        sum(r.result.report.host_shared for r in runs if r.result) == 16 - 3
    )  # all but the three physical calls
    assert stats.open == 0


def test_a_cancelled_run_leaves_the_calls_others_wait_on_running() -> None:
    """The run that started the shared calls is cancelled mid-stream: the others, which
    wait on those calls, still get them (one physical call each) and equal their own run."""
    slow = Conditions(
        chunk_sizes=(4,),
        pauses=(0.01,),
        latencies={"docs.search": 0.3, "docs.fetch": 0.3},
        failing=frozenset(),
        policy=LanePolicy(),
    )
    source = "a = docs.search('alpha')\nb = docs.fetch('beta')\n" + "# thinking\n" * 6 + "[a, b]\n"
    sets = [Plan(source, "r1", slow, cancel_after=14)] + [
        Plan(source, "r1", slow) for _ in range(3)
    ]

    runs, host = anyio.run(run_many, sets, slow)
    assert runs[0].result is None
    docs = host.registration("docs").obj
    assert sorted(docs.physical) == [("fetch", "beta", "r1"), ("search", "alpha", "")]  # type: ignore[attr-defined]
    assert all(
        r.result is not None and r.result.report.physical == 0 for r in runs[1:]
    )  # so they were run 0's
    check_many(runs, host.method_specs())
