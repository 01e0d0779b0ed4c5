"""A long unfinished block streams line by line (issue 36, divergence 6 / item 7).

A 60-line ``for`` body in 5-character chunks: each new line is discovered incrementally
(``occurrences.discovery._resume``), every body line's read starts before the loop is
complete, and the run equals the sequential one - alone and as two concurrent runs on one
Host. Time is trio's ``MockClock`` and the Guest the async twin.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest
from trio.testing import MockClock

from pysolate import Effect, Host, LanePolicy, RunResult
from pysolate.testing import Script, ScriptedTool, differences, scripted_tool

from .twin import twin_guest

LINES = 60
SOURCE = (
    'items = ["a", "b", "c"]\n'
    "for d in items:\n"
    + "".join(f'    p{i} = d + "/{i}"\n    r{i} = docs.get(p{i})\n' for i in range(LINES))
    + "[r0, r59]\n"
)


def make_host(share: bool = True) -> tuple[Host, ScriptedTool]:
    docs = scripted_tool(
        get=Script(lambda key: key.upper(), effect=Effect.IMMUTABLE_READ, version="1", latency=0.2)
    )
    host = Host(guest_factory=twin_guest, share=share)
    host.register("docs", docs)
    return host, docs


async def chunks(ended: list[float]) -> AsyncIterator[str]:
    for at in range(0, len(SOURCE), 5):
        yield SOURCE[at : at + 5]
        await anyio.sleep(0.001)
    ended.append(anyio.current_time())


@pytest.mark.parametrize("share", [False, True], ids=["unshared", "shared"])
def test_a_long_loop_body_streamed_in_small_chunks_equals_the_sequential_run(share: bool) -> None:
    """Unshared, every call of both runs claims its early read and nothing is wasted. Shared
    (issue 40), the runs wait on each other's reads, so a run's program can outpace its own
    lane: a claim then finds its read still queued for a slot and runs it itself (contract 7:
    never waited behind), so not every call is a claim; still nothing physical is wasted and
    the two runs make fewer physical reads than two alone."""

    async def main() -> tuple[RunResult, list[RunResult], ScriptedTool, float]:
        reference = await make_host()[0].run_source(SOURCE, speculate=False)
        host, docs = make_host(share)
        results: list[RunResult] = []
        ended: list[float] = []

        async def one() -> None:
            results.append(
                await host.run_stream(chunks(ended), policy=LanePolicy(budget=3 * LINES))
            )

        async with anyio.create_task_group() as tg:
            tg.start_soon(one)
            tg.start_soon(one)
        return reference, results, docs, min(ended)

    reference, results, docs, ended = anyio.run(
        main, backend="trio", backend_options={"clock": MockClock(autojump_threshold=0)}
    )
    assert reference.status.value == "ok" and reference.value == ["C/0", "C/59"]
    for result in results:
        assert differences(reference, result) == []
        if not share:
            assert all(c.lane == "claimed" for c in result.calls)
        assert all(
            o.physical is False for o in result.observations if o.disposition == "cancelled"
        ), "only queued reads withdrawn"
    assert all(r.report.orphaned == 0 for r in results), "no provisional read was wasted"
    if not share:
        assert all(r.report.cancelled == 0 for r in results)
    else:
        assert len(docs.calls) < 2 * len(reference.calls)
    assert any(c.started < ended for c in docs.calls), "reads started while the body streamed"
