"""The event loop keeps reading while the Host discovers (issue 36, divergence 4 / item 5).

Discovery runs on the event loop every run shares. Two things must hold, whatever it
costs: the Host's own work is never taken for the model's silence (the idle watchdog
counts only a read's wait), and the Host's work comes in bounded steps - statements one
at a time, the loop let run once a slice is spent (``pysolate._run._pace``), each argument
evaluation bounded (``EVALUATION_LIMITS``).

Time is trio's ``MockClock`` and the Guest the async twin (``twin``), so a slow discovery is
*simulated*: each statement's discovery advances the clock by a set cost without letting
the loop run (``clock.jump``), which is what a heavy statement does to the loop.
"""

from __future__ import annotations

import ast
from collections.abc import AsyncIterator

import anyio
import pytest
from trio.testing import MockClock

from occurrences import CallKey, Effect, MethodSpec, canonical_arguments
from occurrences.discovery._bindings import EVALUATION_LIMITS
from occurrences.evaluator import _budget
from pysolate import Host, RunResult
from pysolate._run._pace import SLICE
from pysolate.testing import Script, differences, scripted_tool
from scheduler import EventGraph, State

from .twin import twin_guest

LINES = [f"v{i} = docs.get(n={i} * 2)\n" for i in range(6)]
SOURCE = "".join(LINES) + "[v0, v5]\n"


def make_host() -> Host:
    host = Host(guest_factory=twin_guest)
    host.register(
        "docs",
        scripted_tool(get=Script(lambda n: n + 1, effect=Effect.PURE, version="1", latency=0.01)),
    )
    return host


async def two_chunks() -> AsyncIterator[str]:
    """The program in two chunks 50 ms apart: the model is never silent for long."""
    yield "".join(LINES[:3])
    await anyio.sleep(0.05)
    yield "".join(LINES[3:]) + "[v0, v5]\n"


def slow_discovery(
    monkeypatch: pytest.MonkeyPatch, clock: MockClock, seconds: float
) -> list[float]:
    """Each accepted statement's discovery costs ``seconds`` of the loop's time; returns
    the (virtual) times discovery ran."""
    ran: list[float] = []
    add = EventGraph.add_statements

    def costly(self: EventGraph, statements: list[ast.stmt]) -> None:
        add(self, statements)
        if statements:
            clock.jump(seconds * len(statements))
            ran.append(anyio.current_time())

    monkeypatch.setattr(EventGraph, "add_statements", costly)
    return ran


@pytest.mark.parametrize("speculate", [True, False])
def test_a_slow_discovery_is_not_the_models_silence(
    monkeypatch: pytest.MonkeyPatch, speculate: bool
) -> None:
    """Three statements a chunk at 0.4 s of discovery each hold the loop 1.2 s per chunk,
    past the idle bound of 1 s: the run equals the sequential one anyway (it was
    ``aborted: StreamTimeout``, with speculation and without)."""
    clock = MockClock(autojump_threshold=0)
    slow_discovery(monkeypatch, clock, 0.4)

    async def main() -> tuple[RunResult, RunResult]:
        reference = await make_host().run_source(SOURCE, speculate=False)
        result = await make_host().run_stream(two_chunks(), idle_timeout=1.0, speculate=speculate)
        return reference, result

    reference, result = anyio.run(main, backend="trio", backend_options={"clock": clock})
    assert result.status.value == "ok", result.error
    assert differences(reference, result) == []


def test_discovery_lets_the_loop_run_between_statements_once_a_slice_is_spent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A heartbeat task ticking on the loop runs between the statements of one chunk once
    each costs more than a slice: the loop is held one statement at a time, not a chunk."""
    clock = MockClock(autojump_threshold=0)
    ran = slow_discovery(monkeypatch, clock, 2 * SLICE)
    seen: set[int] = set()  # how many statements were discovered when the heartbeat ran

    async def main() -> RunResult:
        async def heartbeat() -> None:
            while True:
                seen.add(len(ran))
                await anyio.sleep(SLICE / 10)  # (a sleep: the mock clock jumps only when all wait)

        async with anyio.create_task_group() as tg:
            tg.start_soon(heartbeat)
            result = await make_host().run_stream(two_chunks())
            tg.cancel_scope.cancel()
        return result

    result = anyio.run(main, backend="trio", backend_options={"clock": clock})
    assert result.status.value == "ok"
    assert seen & {1, 2}, (
        f"the loop ran only around the first chunk's three statements: {sorted(seen)}"
    )


def test_one_argument_evaluation_in_discovery_is_bounded() -> None:
    """An argument heavy to compute (about 50,000 steps) is not known to discovery, so
    discovery never spends more than ``EVALUATION_LIMITS.max_steps`` on one evaluation;
    an ordinary one is. Counted in evaluator steps, not timed."""
    peak = 0
    charge = _budget.Budget.charge

    def counted(self: _budget.Budget, n: int = 1) -> None:
        nonlocal peak
        charge(self, n)
        peak = max(peak, self.steps)

    caps = {"docs": {"get": MethodSpec(Effect.PURE, "1")}}
    graph = EventGraph(
        caps,
        lambda c, m, a, k: CallKey(
            c, m, "1", canonical_arguments({"args": a, "kwargs": k}), "root"
        ),
    )
    source = "a = docs.get(n=sum(x % 7 for x in range(9999)))\nb = docs.get(n=sum(range(100)))\n"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_budget.Budget, "charge", counted)
        graph.add_statements(ast.parse(source).body)
    heavy, light = graph.nodes()
    assert heavy.state is State.INELIGIBLE and light.kwargs == {"n": 4950}
    assert peak <= EVALUATION_LIMITS.max_steps + 1
