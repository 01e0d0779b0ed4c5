"""Re-speculation after writes: reads after a write start as soon as the Guest's write returns.

Each test streams a program whose reads follow a write on a capability without views or
scopes (a plain key-value store), then checks when the reads physically ran, how many were
claimed, and that the result equals the sequential reference on an identical fresh Host.
Overlap is checked by order (a read started before another ended), never by duration.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from pysolate import Effect, Host, LanePolicy, RunResult
from pysolate.testing import Script, ScriptedTool, differences, in_process_guest, scripted_tool

pytestmark = pytest.mark.anyio


READ = 0.2


def make_host() -> tuple[Host, ScriptedTool]:
    state: dict[str, object] = {"config": "v1", "counter": 0, "a": 1, "b": 2}

    def get(key: str) -> object:
        if key not in state:
            raise KeyError(key)
        return state[key]

    def put(key: str, value: object) -> None:
        state[key] = value

    store = scripted_tool(
        get=Script(get, effect=Effect.IMMUTABLE_READ, version="1", latency=READ),
        put=Script(put, effect=Effect.WRITE, version="1", latency=0.05),
    )
    host = Host(guest_factory=in_process_guest)
    host.register("store", store)
    return host, store


async def chunks(source: str) -> AsyncIterator[str]:
    for line in source.splitlines(keepends=True):
        yield line


async def both(
    source: str, policy: LanePolicy | None = None
) -> tuple[RunResult, ScriptedTool, RunResult]:
    host, store = make_host()
    result = await host.run_stream(chunks(source), policy=policy)
    ref_host, _ = make_host()
    reference = await ref_host.run_source(source, speculate=False)
    assert differences(reference, result) == []
    return result, store, reference


async def test_reads_after_a_write_start_together_when_it_returns() -> None:
    """Three reads after a write run side by side once the write returns (each claimed),
    instead of one after the other."""
    source = (
        'store.put(key="config", value="v2")\n'
        'a = store.get(key="config")\n'
        'b = store.get(key="a")\n'
        'c = store.get(key="b")\n'
        "[a, b, c]\n"
    )
    result, store, _ = await both(source)
    assert result.value == ["v2", 1, 2]
    gets = store.calls_to("get")
    assert len(gets) == 3, "one physical call each"
    put = store.calls_to("put")[0]
    assert put.ended is not None
    assert all(g.started >= put.ended for g in gets), "never before the write returned"
    last_start = max(g.started for g in gets)
    assert all(g.ended is not None and g.ended > last_start for g in gets), "side by side"
    assert result.report.claimed == 3 and result.report.orphaned == 0


async def test_a_second_write_ends_the_reads_started_after_the_first() -> None:
    """Reads are started only up to the next write: the read after the second write is
    started when that one returns, and sees it."""
    source = (
        'store.put(key="counter", value=1)\n'
        'x = store.get(key="counter")\n'
        'store.put(key="counter", value=2)\n'
        'y = store.get(key="counter")\n'
        "[x, y]\n"
    )
    result, store, _ = await both(source)
    assert result.value == [1, 2]
    assert len(store.calls_to("get")) == 2
    assert result.report.claimed == 2 and result.report.orphaned == 0


async def test_a_write_the_program_order_did_not_predict_stops_the_guess() -> None:
    """A write under a branch decided by a read the Guest made after a write cannot be
    matched: nothing more is re-speculated on that capability, and the result is the same."""
    source = (
        'store.put(key="a", value=5)\n'
        'n = store.get(key="a")\n'
        "if n > 3:\n"
        '    store.put(key="b", value=n)\n'
        'm = store.get(key="b")\n'
        "[n, m]\n"
    )
    result, _store, _ = await both(source)
    assert result.value == [5, 5]
    assert result.report.physical == result.report.logical, "no read wasted"


async def test_a_read_on_a_stale_view_is_never_claimed() -> None:
    """The read is guessed at the first write's view, but the program writes again through
    unknown code before reading: the early read is orphaned, the Guest reads the new value."""
    source = (
        'store.put(key="config", value="v2")\n'
        """exec('store.put(key="config", value="v3")')\n"""
        'a = store.get(key="config")\n'
        "a\n"
    )
    result, store, _ = await both(source)
    assert result.value == "v3"
    assert len(store.calls_to("get")) == 2, "the guess, and the Guest's own read"
    assert result.report.claimed == 0 and result.report.orphaned + result.report.cancelled == 1


async def test_no_respeculation_without_speculating() -> None:
    host, store = make_host()
    source = 'store.put(key="a", value=3)\nx = store.get(key="a")\ny = store.get(key="b")\n[x, y]\n'
    result = await host.run_stream(chunks(source), speculate=False)
    assert result.value == [3, 2]
    assert result.report.claimed == 0
    gets = store.calls_to("get")
    assert gets[1].started >= (gets[0].ended or 0.0), "one after the other"


async def test_respeculation_respects_the_budget() -> None:
    source = 'store.put(key="a", value=3)\nx = store.get(key="a")\ny = store.get(key="b")\n[x, y]\n'
    result, store, _ = await both(source, LanePolicy(budget=1))
    assert len(store.calls_to("get")) == 2
    assert result.report.claimed == 1
