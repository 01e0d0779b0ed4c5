"""Schedule control: speculating runs on a virtual clock, in an order fixed by a seed.

What drives what: trio's ``MockClock(autojump_threshold=0)`` (through anyio's trio
backend) makes every sleep — chunk pauses, tool latencies, timeouts — virtual and instant,
and trio's scheduler picks the order of simultaneously runnable tasks with its module
random generator, which we seed. So one seed is one interleaving of stream, lane, tools
and Guest, and it reproduces exactly: a failing seed is a failing test.

The in-process Guest cannot be driven this way: its program runs in a worker thread, which
neither the mock clock nor the seeded scheduler controls (the clock even jumps past its
wall-time limit while the thread computes). The tests here therefore replace the Guest
with one that runs in the event loop and makes the same calls through the same
``RunScope.handler``, so the real prefix parser, event graph, speculative lane, broker and
claims run unchanged: ``CoroutineGuest`` (a hand-written async twin of a fixed program)
and ``twin.twin_guest`` (the async twin of any generated program, by AST rewrite; checked
here to show the program what the in-process Guest shows).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence

import anyio
import pytest
import trio
import trio.testing
from example_counts import DIFFERENTIAL, examples
from hypothesis import given, settings
from hypothesis import strategies as st
from trio.testing import MockClock

from occurrences import fresh_copy
from pysolate import LanePolicy, RunResult
from pysolate._guest_api import (
    CallHandler,
    ErrorInfo,
    Guest,
    GuestFactory,
    GuestLimits,
    GuestOutcome,
    Isolation,
    ToolFailure,
)
from pysolate.testing import check_invariants, in_process_guest

from .harness import (
    QUIET,
    TimedChunks,
    Tools,
    assert_no_early_effects,
    assert_same,
    build_host,
    check_pair,
    scheduled_pair,
)
from .programs import Conditions, conditions, programs
from .twin import twin_guest

Call = Callable[..., Awaitable[object]]
Program = Callable[[Call], Awaitable[object]]


class CoroutineGuest:
    """A Guest running an async twin of the sealed program in the event loop."""

    def __init__(self, program: Program) -> None:
        self._program = program

    async def run(self, source: str, handler: CallHandler) -> GuestOutcome:
        async def call(capability: str, method: str, *args: object, **kwargs: object) -> object:
            return await handler(capability, method, args, kwargs)

        try:
            value = await self._program(call)
        except ToolFailure as failure:
            return GuestOutcome(
                "error",
                None,
                "",
                ErrorInfo(failure.type_name, failure.message, None),
                Isolation("in_process"),
            )
        return GuestOutcome("ok", fresh_copy(value), "", None, Isolation("in_process"))

    async def aclose(self) -> None:
        pass


def coroutine_guest(program: Program) -> GuestFactory:
    async def start(capabilities: Mapping[str, Sequence[str]], limits: GuestLimits) -> Guest:
        return CoroutineGuest(program)

    return start


# -- the programs and their async twins ------------------------------------------------

DEPENDENT = """\
r = docs.search('alpha')
f = docs.fetch(r[0])
t = workspace.read_text('a.txt')
workspace.write_text('a.txt', t + f)
u = workspace.read_text('a.txt')
try:
    docs.search('bad')
except LookupError:
    pass
n = clock.now()
g = docs.search(u)
[r, f, u, n, g]
"""


async def dependent(call: Call) -> object:
    r = await call("docs", "search", "alpha")
    f = await call("docs", "fetch", r[0])  # type: ignore[index]
    t = await call("workspace", "read_text", "a.txt")
    await call("workspace", "write_text", "a.txt", t + f)  # type: ignore[operator]
    u = await call("workspace", "read_text", "a.txt")
    try:
        await call("docs", "search", "bad")
    except ToolFailure as failure:
        assert failure.type_name == "LookupError"
    n = await call("clock", "now")
    g = await call("docs", "search", u)
    return [r, f, u, n, g]


LOOP = """\
names = workspace.list_dir('d')
texts = [workspace.read_text('d/' + x) for x in names]
hits = [docs.search(x) for x in names]
shell.run('report')
for t in texts:
    docs.fetch(t)
[names, texts, hits]
"""


async def loop(call: Call) -> object:
    names = await call("workspace", "list_dir", "d")
    texts = [await call("workspace", "read_text", "d/" + x) for x in names]  # type: ignore[attr-defined]
    hits = [await call("docs", "search", x) for x in names]  # type: ignore[attr-defined]
    await call("shell", "run", "report")
    for t in texts:
        await call("docs", "fetch", t)  # fetch('bad') fails: the program ends here
    return [names, texts, hits]


PROGRAMS = {"dependent": (DEPENDENT, dependent), "loop": (LOOP, loop)}

TIMED = dataclasses.replace(
    QUIET,
    chunk_sizes=(4, 9, 2),
    pauses=(0.05, 0.0, 0.02),
    latencies={"docs.search": 0.3, "docs.fetch": 0.2, "clock.now": 0.1, "shell.run": 0.1},
    policy=LanePolicy(concurrency=3, budget=8, allow_discardable=True),
)
"""Virtual latencies: tens of milliseconds of stream pauses, hundreds of tool latency."""


def conditions_for(seed: int) -> Conditions:
    """The run conditions a seed stands for: chunking, pauses, latencies (with ties, so
    the scheduler's seeded order matters too) and lane policy."""
    rng = random.Random(seed)
    steps = (0.0, 0.05, 0.1, 0.3)
    return dataclasses.replace(
        TIMED,
        chunk_sizes=tuple(rng.randint(1, 30) for _ in range(rng.randint(1, 4))),
        pauses=tuple(rng.choice(steps) for _ in range(rng.randint(1, 4))),
        latencies={method: rng.choice(steps[1:]) for method in TIMED.latencies},
        policy=LanePolicy(
            concurrency=rng.randint(1, 4),
            budget=rng.choice((1, 3, 64)),
            allow_discardable=rng.random() < 0.5,
        ),
    )


@dataclasses.dataclass(frozen=True, slots=True)
class Trace:
    """Everything observable about one interleaving, on the virtual clock."""

    tool_calls: tuple[tuple[object, ...], ...]
    receipts: tuple[tuple[object, ...], ...]
    observations: tuple[tuple[object, ...], ...]
    wall: float


def _trace(result: RunResult, tools: Tools) -> Trace:
    return Trace(
        tool_calls=tuple(
            (name, c.method, c.args, c.started, c.ended, c.outcome)
            for name, tool in tools.by_name().items()
            for c in tool.calls
        ),
        receipts=tuple(
            (c.capability, c.method, c.args, c.lane, c.started, c.ended) for c in result.calls
        ),
        observations=tuple(
            (o.id, o.key, o.disposition, o.started, o.ended) for o in result.observations
        ),
        wall=result.report.wall_seconds,
    )


def run_seeded(
    seed: int, name: str, speculate: bool = True
) -> tuple[RunResult, Tools, float | None]:
    """One run of program ``name`` on trio with a mock clock: ``seed`` fixes the run's
    conditions (``conditions_for``) and the scheduler's order among simultaneously
    runnable tasks, hence the whole interleaving."""
    source, twin = PROGRAMS[name]
    conditions = conditions_for(seed)
    trio._core._run._r.seed(seed)

    async def main() -> tuple[RunResult, Tools, float | None]:
        host, tools = build_host(conditions, coroutine_guest(twin), sync_fetch=False)
        if not speculate:
            return await host.run_source(source, speculate=False), tools, None
        chunks = TimedChunks(source, conditions.chunk_sizes, conditions.pauses)
        result = await host.run_stream(chunks, policy=conditions.policy)
        check_invariants(result, host.method_specs())
        return result, tools, chunks.ended

    return anyio.run(
        main, backend="trio", backend_options={"clock": MockClock(autojump_threshold=0)}
    )


SEEDS = range(40)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_seed_reproduces_its_interleaving_exactly(name: str) -> None:
    """Same seed, same trace: tool start/end times, receipts, dispositions, wall time."""
    for seed in SEEDS[:8]:
        first = _trace(*run_seeded(seed, name)[:2])
        again = _trace(*run_seeded(seed, name)[:2])
        assert first == again, f"seed {seed} did not reproduce"


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_every_seeded_interleaving_equals_the_sequential_run(name: str) -> None:
    """Over many seeds (interleavings), the speculating run equals the sequential one and
    no effect starts before the stream ends (virtual time, so the comparison is exact)."""
    ref, _, _ = run_seeded(0, name, speculate=False)
    assert len(ref.calls) >= 8
    interleavings = set()
    for seed in SEEDS:
        result, tools, ended = run_seeded(seed, name)
        assert_same(result, ref)
        assert_no_early_effects(tools, result, ended)
        trace = _trace(result, tools)
        interleavings.add((trace.observations, tuple(r[:4] for r in trace.receipts)))
    assert len(interleavings) >= len(SEEDS) // 4  # the seeds do reach different schedules


def test_virtual_time_makes_the_saving_exact() -> None:
    """Four independent 0.5 s reads, one line per 0.1 s of stream (five lines, sealed at
    0.5 s): stream-then-run takes 0.5 + 4 * 0.5 s; speculating, read ``i`` starts in the very
    chunk that ends its line (at 0.1 * i s, zero extra chunks), so the run ends when the last
    read does, at 0.3 + 0.5 s (exact on the mock clock)."""
    source = "".join(f"r{i} = docs.search('q{i}')\n" for i in range(4)) + "[r0, r1, r2, r3]\n"

    async def twin(call: Call) -> object:
        return [await call("docs", "search", f"q{i}") for i in range(4)]

    lines = source.splitlines(keepends=True)
    conditions = dataclasses.replace(QUIET, latencies={"docs.search": 0.5})

    async def main(speculate: bool) -> float:
        host, _ = build_host(conditions, coroutine_guest(twin), sync_fetch=False)
        start = trio.current_time()
        stream = TimedChunks("".join(lines), tuple(len(x) for x in lines), (0.1,))
        if speculate:
            result = await host.run_stream(stream)
        else:
            async for _ in stream:  # stream first, then run
                pass
            result = await host.run_source(source, speculate=False)
        assert result.status == "ok"
        return trio.current_time() - start

    clock = {"clock": MockClock(autojump_threshold=0)}
    baseline = anyio.run(main, False, backend="trio", backend_options=clock)
    clock = {"clock": MockClock(autojump_threshold=0)}
    pysolate = anyio.run(main, True, backend="trio", backend_options=clock)
    assert baseline == pytest.approx(0.5 + 4 * 0.5)  # five chunks, 0.1 s after each; four reads
    assert pysolate == pytest.approx(0.3 + 0.5)  # r3 is accepted when its own line arrives


@pytest.mark.parametrize(
    "anyio_backend",
    [pytest.param(("trio", {"clock": MockClock(autojump_threshold=0)}), id="trio-mock")],
)
@pytest.mark.anyio
async def test_a_read_never_outlives_its_run_on_the_mock_clock(anyio_backend: object) -> None:
    """A 100 s discardable read on a branch never taken is cancelled at the end of the run,
    after zero real and 0.0x virtual seconds: nothing waits for it."""
    conditions = dataclasses.replace(QUIET, latencies={"docs.search": 100.0, "clock.now": 0.0})

    async def twin(call: Call) -> object:
        return await call("clock", "now")

    host, tools = build_host(conditions, coroutine_guest(twin), sync_fetch=False)
    start = trio.current_time()
    source = "n = clock.now()\nif n > 5:\n    docs.search('alpha')\nn\n"
    result = await host.run_stream(TimedChunks(source, (8,), (0.01,)), policy=conditions.policy)
    check_invariants(result, host.method_specs())
    assert result.value == 1
    assert trio.current_time() - start < 1.0
    assert [c.outcome for c in tools.docs.calls] == ["cancelled"]
    assert [o.disposition for o in result.observations if o.lane == "speculative"] == ["cancelled"]


# -- generated programs on the virtual clock --------------------------------------------

SCHEDULED_PROGRAMS = examples(200, full=500)
"""Generated (program, conditions, seed) cases run on the mock clock by default."""


@settings(DIFFERENTIAL, max_examples=SCHEDULED_PROGRAMS)
@given(programs(), conditions(), st.integers(0, 2**32 - 1))
def test_generated_programs_on_seeded_schedules(source: str, case: Conditions, seed: int) -> None:
    """The differential property over generated programs, each on a seeded interleaving
    with virtual latencies: a failure here replays exactly from (program, conditions, seed)."""
    check_pair(scheduled_pair(source, case, seed))


def test_a_generated_case_replays_exactly() -> None:
    """The same (program, conditions, seed) gives the same trace, twice."""
    source = (
        "r = docs.search('alpha')\nfor x in r:\n    f = docs.fetch(x)\n    t = workspace.read_text('a.txt')\n"
        "workspace.write_text('a.txt', t + f)\nn = clock.now()\n[r, workspace.read_text('a.txt'), n]\n"
    )
    for seed in range(5):
        case = conditions_for(seed)
        first, again = scheduled_pair(source, case, seed), scheduled_pair(source, case, seed)
        check_pair(first)
        assert _trace(first.speculative, first.speculative_tools) == _trace(
            again.speculative, again.speculative_tools
        )


@pytest.mark.soak
@settings(DIFFERENTIAL, max_examples=10_000)
@given(programs(max_statements=12), conditions(), st.integers(0, 2**32 - 1))
def test_soak_on_seeded_schedules(source: str, case: Conditions, seed: int) -> None:
    """10,000 generated programs on seeded schedules (``-m soak``)."""
    check_pair(scheduled_pair(source, case, seed))


TWIN_PROGRAMS = examples(50, full=100)
"""Generated programs run sequentially through the twin and through the in-process Guest."""


@settings(DIFFERENTIAL, max_examples=TWIN_PROGRAMS)
@given(programs(), conditions())
def test_the_twin_shows_what_the_in_process_guest_shows(source: str, case: Conditions) -> None:
    """The async twin is a faithful stand-in: sequential runs through it and through the
    in-process Guest are observationally equal."""

    async def main() -> tuple[RunResult, RunResult]:
        threaded, _ = build_host(case, in_process_guest, sync_fetch=False)
        twin, _ = build_host(case, twin_guest, sync_fetch=False)
        return await threaded.run_source(source, speculate=False), await twin.run_source(
            source, speculate=False
        )

    assert_same(*anyio.run(main))
