"""Smoke test of the latency benchmark (benchmarks/latency.py), scaled down.

The benchmark is not part of the default run (it takes minutes); this only checks that it
still runs end to end on one scenario, replayed 20x faster with tools 20x quicker: the
Pysolate result equals its sequential baseline, the oracle bound is computed, and the
table renders. Timings are not asserted.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
from benchmark_module import load_benchmark
from rich.console import Console

from pysolate.streams import Chunk

pytestmark = pytest.mark.anyio


def load_latency() -> ModuleType:
    return load_benchmark("latency")


async def test_one_scaled_scenario_equals_its_baseline_and_the_table_renders(
    tmp_path: Path,
) -> None:
    latency = load_latency()
    measured = await latency.measure(
        "dependent_chain", speed=20, latency_scale=0.05, guest="in-process", svg_dir=tmp_path
    )
    assert measured.mismatches == []
    assert measured.result.status == "ok"
    assert len(measured.oracle.calls) == measured.result.report.logical == 5
    console = Console(record=True, width=160)
    console.print(latency.table([measured]))
    text = console.export_text()
    assert "dependent_chain" in text and "yes" in text
    assert (tmp_path / "dependent_chain.svg").read_text().startswith("<svg")


def test_the_session_scenario_equals_the_sequential_session_and_reports() -> None:
    """The session scenario (four turns, one rejected), scaled down, in-process."""
    latency = load_latency()
    lines = latency.session_lines(0.05, "in-process", 20.0)
    assert "equal to the sequential session: yes" in lines[0]
    statuses = [line.split()[2] for line in lines[1:]]
    assert statuses == ["ok", "ok", "rejected", "ok"]


@pytest.mark.parametrize("name", ["ws_read_after_write", "ws_write_heavy"])
async def test_the_workspace_scenarios_write_early_and_equal_their_baseline(
    tmp_path: Path, name: str
) -> None:
    """Issue 17's scenarios, scaled: equal to the baseline (final workspace included), and
    the writes ran on a layer (the oracle lets them run mid-stream too)."""
    latency = load_latency()
    measured = await latency.measure(
        name, speed=20, latency_scale=0.05, guest="in-process", svg_dir=tmp_path
    )
    assert measured.mismatches == []
    assert measured.result.report.early_writes >= 2
    assert any(c.method == "write_text" and c.eligible for c in measured.oracle.calls)


async def test_a_rejected_stream_after_early_writes_leaves_the_root_untouched() -> None:
    latency = load_latency()
    line = await latency.rejected_after_write(0.05, "in-process")
    assert "rejected" in line and line.endswith("root untouched: yes")


async def test_the_replay_is_anchored_at_t0_not_at_the_first_pull(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A reader that starts late gets the chunks already due at once (a provider's stream
    flows whether or not its reader is ready); anchored at its first pull it waits."""
    import anyio

    tools = load_benchmark("bench_tools")
    waits: list[float] = []

    async def sleep(delay: float) -> None:
        waits.append(delay)

    monkeypatch.setattr(tools, "sleep", sleep)
    chunks = [Chunk(0.0, "a"), Chunk(0.05, "b"), Chunk(0.1, "c")]
    late = anyio.current_time() - 1.0  # the reader's set-up took a second
    assert [text async for text in tools.anchored(chunks, late)] == ["a", "b", "c"]
    assert waits == []  # every chunk was due
    assert [text async for text in tools.anchored(chunks, None)] == ["a", "b", "c"]
    assert len(waits) == 2  # from the first pull: "b" and "c" are waited for


async def test_exact_sleep_waits_at_least_its_delay() -> None:
    import anyio

    tools = load_benchmark("bench_tools")
    for delay in (0.0, 0.0123, 0.03):
        start = anyio.current_time()
        await tools.exact_sleep(delay)
        assert anyio.current_time() - start >= delay


@pytest.mark.parametrize("name", ["pydantic-ai", "smolagents", "mcp", "openai-agents"])
def test_each_bundled_example_runs_both_ways_with_equal_results(name: str) -> None:
    """benchmarks/examples.py (the docs/integrations.md table) still switches each example
    between stream-then-run and Pysolate, and the two results are equal. Timings are not
    asserted."""
    base, fast, equal = load_benchmark("examples").measure(name, 1)
    assert equal and base > 0 and fast > 0
