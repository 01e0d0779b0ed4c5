"""Differential runs: ``run_stream`` equals ``run_source(speculate=False)`` (issue 6, item 1).

Each generated program (``programs``) runs under random chunking, pauses, tool latencies,
tool failures and lane policies (``conditions``). Property checked for every one: equal
status, value, stdout, error, ordered call log and final workspace; the run-end accounting
invariants (``check_invariants``); no live read, write or unknown call before the stream
ended, and none replayed.

The default run is derandomized (same programs every time, so CI is reproducible): 120
programs through the in-process Guest and a sample through the isolated subprocess Guest
(320 and more samples with ``PYSOLATE_HYPOTHESIS_PROFILE=full``, see ``example_counts``).
``pytest -m soak tests/equivalence`` runs 10,000 more. Failures that hypothesis shrank are
kept as ``@example``s below (and, when they need a specific schedule, in
``test_regressions.py``).
"""

from __future__ import annotations

import dataclasses

import pytest
from example_counts import DIFFERENTIAL, examples
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pysolate import LanePolicy
from pysolate._guest import start_subprocess_guest

from .contention import contended_conditions, contended_programs, differential_series
from .harness import differential
from .programs import ROOTS, Conditions, conditions, programs

DEFAULT_PROGRAMS = examples(120, full=320)
"""Programs the default (CI) run executes through the in-process Guest."""

SUBPROCESS_PROGRAMS = examples(20, full=40)
"""Programs the default run also executes through the subprocess Guest (slower start-up)."""

FUNCTION_TOOL_PROGRAMS = examples(50, full=120)
"""Programs of the function-tool mode (tools as globals ``search(q)``) through the in-process Guest."""

FUNCTION_TOOL_SUBPROCESS_PROGRAMS = examples(8, full=15)
"""Programs of the function-tool mode through the subprocess Guest."""

SYNC_PROGRAMS = examples(25, full=60)
"""Programs the default run also executes through the blocking API (``SyncHost``, the
stream a blocking iterator), in-process; a sample of the same strategies and checks."""

SYNC_SUBPROCESS_PROGRAMS = examples(5, full=10)
"""Programs through the blocking API and the isolated subprocess Guest."""

SOAK_PROGRAMS = 10_000
"""Programs of the ``soak`` run."""

_EAGER = Conditions(
    chunk_sizes=(3,),
    pauses=(0.002,),
    latencies={"docs.search": 0.005, "docs.fetch": 0.005},
    failing=frozenset({"bad"}),
    policy=LanePolicy(concurrency=8, budget=64, allow_discardable=True),
)
"""Small chunks, slow reads, a wide lane: as much early work overlapping the Guest as can be."""


@settings(DIFFERENTIAL, max_examples=DEFAULT_PROGRAMS)
@given(programs(), conditions(), st.sampled_from(ROOTS))
@example(
    # Read after a write to the same path must not claim the pre-write early read.
    "t1 = workspace.read_text('a.txt')\nworkspace.write_text('a.txt', t1 + '!')\nt2 = workspace.read_text('a.txt')\n[t1, t2]\n",
    _EAGER,
    "memory",
)
@example(
    # The same on a git commit and on a lazily read directory (issue 38).
    "t1 = workspace.read_text('a.txt')\nworkspace.write_text('a.txt', t1 + '!')\nt2 = workspace.read_text('a.txt')\n[t1, t2]\n",
    _EAGER,
    "git",
)
@example(
    "t1 = workspace.read_text('a.txt')\nworkspace.write_text('a.txt', t1 + '!')\nt2 = workspace.read_text('a.txt')\n[t1, t2]\n",
    _EAGER,
    "lazy",
)
@example(
    # A mutated result must not leak into a later claim of the same key.
    "r1 = docs.search('alpha')\nr1.append('zz')\nr2 = docs.search('alpha')\n[r1, r2]\n",
    _EAGER,
    "memory",
)
@example(
    # An early failure surfaces at its call, inside the program's try.
    "r1 = docs.search('alpha')\ntry:\n    r2 = docs.search('bad')\nexcept LookupError as e:\n    print('caught', e)\nr1\n",
    _EAGER,
    "memory",
)
@example(
    # A failure on a branch never taken is never surfaced.
    "n1 = clock.now()\nif n1 > 5:\n    docs.fetch('bad')\nn1\n",
    _EAGER,
    "memory",
)
@example(
    # Equal-key sync reads still in flight at the end: the follower settles late (was a crash).
    "1/0\nf = docs.fetch('a')\np = docs.fetch('a')\n",
    Conditions(
        chunk_sizes=(7,),
        pauses=(0.0,),
        latencies={"docs.fetch": 0.05},
        failing=frozenset({"bad"}),
        policy=LanePolicy(concurrency=1),
    ),
    "memory",
)
def test_stream_equals_sequential_in_process(source: str, case: Conditions, root: str) -> None:
    """Speculating run == sequential reference, with invariants, through the in-process Guest,
    on a workspace root of each kind (in memory, a git commit, a lazy directory)."""
    differential(source, dataclasses.replace(case, root=root))


@settings(DIFFERENTIAL, max_examples=SUBPROCESS_PROGRAMS)
@given(programs(max_statements=5), conditions(), st.sampled_from(ROOTS))
def test_stream_equals_sequential_subprocess(source: str, case: Conditions, root: str) -> None:
    """The same property through the isolated subprocess Guest (a sample)."""
    differential(source, dataclasses.replace(case, root=root), start_subprocess_guest)


@settings(DIFFERENTIAL, max_examples=FUNCTION_TOOL_PROGRAMS)
@given(programs(tools_as_functions=True), conditions())
@example(
    # An alias is followed; a rebound name is no tool any more; a write moves every function tool.
    "a1 = fetch\nv1 = a1('alpha')\nfetch = str.upper\nv2 = fetch('beta')\nn = now()\nu = run('x')\nv3 = a1('alpha')\n[v1, v2, v3]\n",
    _EAGER,
)
@example(
    # One store behind two function tools: the read after the write is a new key.
    "m1 = recall('alpha')\nnote('alpha', 'beta')\nm2 = recall('alpha')\n[m1, m2]\n",
    dataclasses.replace(_EAGER, policy=LanePolicy(concurrency=8, budget=64, share_formal=True)),
)
def test_function_tools_stream_equals_sequential(source: str, case: Conditions) -> None:
    """The same property with the tools registered as top-level functions (issue 15)."""
    differential(source, dataclasses.replace(case, tools_as_functions=True))


@settings(DIFFERENTIAL, max_examples=FUNCTION_TOOL_SUBPROCESS_PROGRAMS)
@given(programs(max_statements=5, tools_as_functions=True), conditions())
def test_function_tools_stream_equals_sequential_subprocess(source: str, case: Conditions) -> None:
    """Function-tool mode through the isolated subprocess Guest (a sample)."""
    differential(source, dataclasses.replace(case, tools_as_functions=True), start_subprocess_guest)


@settings(DIFFERENTIAL, max_examples=SYNC_PROGRAMS)
@given(programs(tools_as_functions=False), conditions())
def test_blocking_api_stream_equals_sequential(source: str, case: Conditions) -> None:
    """The same property through the blocking API (``SyncHost``): reference and speculating
    run both blocking calls from a sync caller's thread, the stream a blocking iterator."""
    differential(source, case, api="sync")


@settings(DIFFERENTIAL, max_examples=SYNC_SUBPROCESS_PROGRAMS)
@given(programs(max_statements=5), conditions())
def test_blocking_api_stream_equals_sequential_subprocess(source: str, case: Conditions) -> None:
    """The blocking API through the isolated subprocess Guest (a sample)."""
    differential(source, case, start_subprocess_guest, api="sync")


@pytest.mark.soak
@settings(DIFFERENTIAL, max_examples=SOAK_PROGRAMS)
@given(programs(max_statements=12), conditions(), st.sampled_from(ROOTS))
def test_soak(source: str, case: Conditions, root: str) -> None:
    """10,000 programs: only when selected with ``-m soak`` (deselected by default in
    ``pyproject.toml``)."""
    differential(source, dataclasses.replace(case, root=root))


# -- contention (issue 36, item 8) ------------------------------------------------------------

CONTENDED_PROGRAMS = examples(25, full=60)
"""Contended programs (``contention``) the default run executes through the in-process Guest."""

CONTENDED_SUBPROCESS_PROGRAMS = examples(4, full=8)
"""Contended programs through the subprocess Guest."""

CONTENDED_SERIES = examples(6, full=12)
"""Series of three contended programs on one Host, one after another (in-process)."""


@settings(DIFFERENTIAL, max_examples=CONTENDED_PROGRAMS)
@given(contended_programs(), contended_conditions())
def test_stream_equals_sequential_under_contention(source: str, case: Conditions) -> None:
    """Few threads, tight timeouts, tools that serialise their callers, loops left by
    ``break``/``continue``, heavy arguments: still equal to the sequential run."""
    differential(source, case)


@settings(DIFFERENTIAL, max_examples=CONTENDED_SUBPROCESS_PROGRAMS)
@given(contended_programs(max_statements=5), contended_conditions())
def test_stream_equals_sequential_under_contention_subprocess(
    source: str, case: Conditions
) -> None:
    differential(source, case, start_subprocess_guest)


@settings(DIFFERENTIAL, max_examples=CONTENDED_SERIES)
@given(
    st.lists(contended_programs(max_statements=5), min_size=2, max_size=3), contended_conditions()
)
def test_runs_on_one_host_under_contention_each_equal_their_sequential_run(
    sources: list[str], case: Conditions
) -> None:
    """What one run leaves (stuck early threads, a tool's queue) never changes the next."""
    differential_series(sources, case)


@pytest.mark.soak
@settings(DIFFERENTIAL, max_examples=SOAK_PROGRAMS // 5)
@given(contended_programs(max_statements=10), contended_conditions())
def test_soak_under_contention(source: str, case: Conditions) -> None:
    """2,000 contended programs: only with ``-m soak``."""
    differential(source, case)
