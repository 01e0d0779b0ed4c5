"""Fault catalogue, Host side: an exhausted budget, and many runs sharing one Host.

Each asserts equality with the sequential reference and the run-end invariants, and that
no effect ran before its own stream ended.
"""

from __future__ import annotations

import dataclasses

import anyio
import pytest

from pysolate import LanePolicy, RunResult
from pysolate.testing import check_invariants

from .harness import (
    QUIET,
    TimedChunks,
    assert_no_early_effects,
    assert_same,
    build_host,
    reference,
    streamed,
)

pytestmark = pytest.mark.anyio


async def test_budget_exhausted_mid_stream_leaves_the_rest_to_the_guest() -> None:
    """Budget 2, six independent reads: two run early and are claimed, four run direct;
    the result is the sequential one."""
    conditions = dataclasses.replace(QUIET, pauses=(0.003,), policy=LanePolicy(budget=2))
    queries = ["alpha", "beta", "gamma", "delta", "eps", "zeta"]
    source = (
        "".join(f"r{i} = docs.search({q!r})\n" for i, q in enumerate(queries))
        + "n = clock.now()\n[r0, r5, n]\n"
    )
    result, tools, chunks = await streamed(source, conditions)
    assert result.status == "ok"
    assert len([o for o in result.observations if o.lane == "speculative"]) == 2
    assert [c.lane for c in result.calls] == [
        "claimed",
        "claimed",
        "direct",
        "direct",
        "direct",
        "direct",
        "direct",
    ]
    assert len(tools.docs.calls) == 6
    assert_same(result, await reference(source, conditions))
    assert_no_early_effects(tools, result, chunks.ended)


def _program(i: int) -> str:
    """Run ``i``'s program: reads shared with the others, a write of its own, a read-back."""
    return (
        f"r = docs.search({['alpha', 'beta', 'gamma'][i % 3]!r})\n"
        f"t = workspace.read_text('a.txt')\n"
        f"workspace.write_text('a.txt', t + '-run{i}')\n"
        f"back = workspace.read_text('a.txt')\n"
        f"f = docs.fetch(r[0])\n"
        f"[r, t, back, f]\n"
    )


@pytest.mark.parametrize("share", [True, False])
async def test_many_runs_at_once_share_one_host(share: bool) -> None:
    """Twenty concurrent speculating runs on one Host: each equals its own sequential
    reference, and each run's writes stay in its own branch. A Host that shares work makes
    one physical search per distinct query (issue 40); one that does not, one per run."""
    conditions = dataclasses.replace(QUIET, pauses=(0.001,))
    host, tools = build_host(conditions, share=share)
    results: dict[int, RunResult] = {}
    streams: dict[int, TimedChunks] = {}

    async def one(i: int) -> None:
        streams[i] = TimedChunks(_program(i), (5 + i % 7,), conditions.pauses)
        results[i] = await host.run_stream(streams[i], policy=conditions.policy)

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            for i in range(20):
                tg.start_soon(one, i)
    for i, result in results.items():
        check_invariants(result, host.method_specs())
        ref = await reference(_program(i), conditions)
        assert_same(result, ref)
        assert result.value[2] == f"alpha-run{i}"  # type: ignore[index]
        assert result.workspaces["workspace"].changes() == {"a.txt": f"alpha-run{i}".encode()}
    assert len(tools.docs.calls_to("search")) == (
        3 if share else 20
    )  # per distinct key, or per run: no more
