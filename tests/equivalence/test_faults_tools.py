"""Fault catalogue, tool side: failing, hanging, oversized, lying and stubborn tools.

Each test asserts the program-visible outcome, equality with the sequential reference
where the contract promises it, that no write/live read/unknown call ran before the
stream ended (``assert_no_early_effects``) and the run-end invariants (``streamed``).
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
import time

import anyio
import pytest

from occurrences import Effect
from pysolate import Host, LanePolicy, capability
from pysolate.testing import Script, check_invariants, in_process_guest, scripted_tool

from . import harness
from .harness import (
    QUIET,
    assert_no_early_effects,
    assert_same,
    check_pair,
    reference,
    scheduled_pair,
    streamed,
    with_latency,
)

pytestmark = pytest.mark.anyio


async def test_early_read_raising_surfaces_at_its_line() -> None:
    """The early failure is held and raised where the program makes the call, not before:
    the print before it happens, the program stops at line 3."""
    source = "r = docs.search('alpha')\nprint('before')\nf = docs.search('bad')\nprint('after')\n"
    result, tools, chunks = await streamed(source)
    assert result.status == "error"
    assert result.error is not None
    assert (result.error.type, result.error.line) == ("LookupError", 3)
    assert result.stdout == "before\n"
    assert [c.lane for c in result.calls] == ["claimed", "claimed"]
    assert result.calls[1].outcome == "error"
    assert_same(result, await reference(source))
    assert_no_early_effects(tools, result, chunks.ended)


def test_raising_on_a_branch_never_taken_is_never_surfaced() -> None:
    """Discardable early reads fail; the branch is not taken; the failures are dropped.
    On the mock clock (async twin Guest), so the reads deterministically fail before the
    seal."""
    source = "n = clock.now()\nif n > 5:\n    docs.fetch('bad')\n    docs.search('bad')\n'fine'\n"
    case = dataclasses.replace(QUIET, pauses=(0.01,))
    pair = scheduled_pair(source, case, seed=0)
    check_pair(pair)
    result, tools = pair.speculative, pair.speculative_tools
    assert (result.status, result.value) == ("ok", "fine")
    ended = pair.stream_ended
    assert ended is not None
    failed_early = [
        c
        for c in tools.docs.calls
        if c.outcome == "error" and c.ended is not None and c.ended < ended
    ]
    assert len(failed_early) == 2
    assert [o.disposition for o in result.observations if o.lane == "speculative"] == [
        "orphaned",
        "orphaned",
    ]


async def test_hanging_read_times_out_in_the_program() -> None:
    conditions = with_latency(QUIET, docs_search=30.0)
    source = (
        "try:\n    docs.search('alpha')\nexcept TimeoutError as e:\n    print('timeout')\n'done'\n"
    )
    with anyio.fail_after(10):
        result, _, _ = await streamed(source, conditions, call_timeout=0.2)
    assert (result.status, result.value, result.stdout) == ("ok", "done", "timeout\n")
    assert_same(result, await reference(source, conditions, call_timeout=0.2))


async def test_hanging_write_is_outcome_unknown_and_never_retried() -> None:
    conditions = with_latency(QUIET, shell_run=30.0)
    source = "r = docs.search('alpha')\nshell.run('deploy')\nprint('unreachable')\n"
    with anyio.fail_after(10):
        result, tools, chunks = await streamed(source, conditions, call_timeout=0.2)
    assert result.status == "error"
    assert result.error is not None and result.error.type == "ToolError"  # no builtin of that name
    assert result.error.message.startswith("OutcomeUnknown: shell.run did not finish")
    assert result.calls[-1].outcome == "unknown"
    assert len(tools.shell.calls) == 1  # ran once, not replayed
    assert_no_early_effects(tools, result, chunks.ended)
    assert_same(result, await reference(source, conditions, call_timeout=0.2))


async def test_result_over_the_size_cap_fails_at_the_call(monkeypatch: pytest.MonkeyPatch) -> None:
    from pysolate._calls import _crossing

    monkeypatch.setattr(_crossing, "MAX_RESULT_CHARS", 64)
    source = "ok = docs.search('a')\ntry:\n    docs.search('b' * 100)\nexcept ValueError as e:\n    print('too big')\nok\n"
    result, _, _ = await streamed(source)
    assert (result.status, result.stdout) == ("ok", "too big\n")
    assert result.calls[1].lane == "claimed"  # the early read failed the same way, held
    assert_same(result, await reference(source))


class _Dice:
    """A tool that is NOT deterministic, wrongly declared pure by its Host."""

    def __init__(self) -> None:
        self._rolls = itertools.count(1)

    @capability(effect=Effect.PURE)
    async def roll(self) -> int:
        return next(self._rolls)


async def test_nondeterministic_tool_wrongly_declared_pure() -> None:
    """Documented behaviour: a declaration is the Host's promise and Pysolate relies on it.
    Equal keys share one physical call, so the speculating run sees one roll twice where
    the sequential run rolls twice. Nothing else breaks: accounting stays exact."""

    async def run(speculate: bool) -> object:
        host = Host(guest_factory=in_process_guest)
        host.register("dice", _Dice())
        source = "[dice.roll(), dice.roll()]\n"
        if speculate:
            result = await host.run_stream(harness.TimedChunks(source, (5,), (0.0,)))
            check_invariants(result, host.method_specs())
            assert (result.report.physical, result.report.shared) == (1, 1)
        else:
            result = await host.run_source(source, speculate=False)
        return result.value

    assert await run(speculate=False) == [1, 2]
    assert await run(speculate=True) == [1, 1]


async def test_identical_repeated_reads_share_one_physical_call() -> None:
    source = "rs = [docs.search('alpha') for _ in range(5)]\nrs[0].append('mutated')\nrs\n"
    result, tools, _ = await streamed(source)
    assert len(tools.docs.calls) == 1
    assert (result.report.logical, result.report.physical, result.report.shared) == (5, 1, 4)
    assert result.value == [
        ["alpha1", "alpha2", "alpha3", "mutated"],
        *[["alpha1", "alpha2", "alpha3"]] * 4,
    ]
    assert_same(result, await reference(source))


class _Stubborn:
    """A sync read that cannot be interrupted once its thread runs."""

    def __init__(self) -> None:
        self.finished = threading.Event()

    @capability(effect=Effect.IMMUTABLE_READ)
    def slow(self, name: str) -> str:
        time.sleep(1.0)  # far longer than the program: still running when the run ends
        self.finished.set()
        return name


async def test_sync_tool_ignoring_cancellation_is_late() -> None:
    """Early work on a branch never taken is still in its thread when the run ends: the
    lane asks it to stop, it cannot, it finishes anyway: ``late``, never claimed."""
    host = Host(guest_factory=in_process_guest)
    stubborn = _Stubborn()
    host.register("slow", stubborn)
    host.register("clock", scripted_tool(now=Script(lambda: 1, effect=Effect.LIVE_READ)))
    source = "if clock.now() > 5:\n    slow.slow('x')\n'done'\n"
    result = await host.run_stream(
        harness.TimedChunks(source, (4,), (0.0,)), policy=LanePolicy(allow_discardable=True)
    )
    check_invariants(result, host.method_specs())
    assert (result.status, result.value) == ("ok", "done")
    assert result.report.late == 1
    assert [o.disposition for o in result.observations] == ["late"]
    assert not stubborn.finished.is_set()  # the run did not wait for the thread
    await anyio.to_thread.run_sync(stubborn.finished.wait, 5)
