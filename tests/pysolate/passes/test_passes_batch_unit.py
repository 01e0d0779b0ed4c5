"""BatchFusion on its own: grouping, bounds, and a sender cancelled while it waits."""

from __future__ import annotations

import anyio
import pytest
from waiting import wait_until_quiet

from pysolate import Host
from pysolate.passes import BatchFusion, BatchPolicy
from pysolate.passes.testing import LawfulFiles
from scheduler import Probe

pytestmark = pytest.mark.anyio

FILES = {"f1": "one", "f2": "two", "f3": "three"}


def setup(policy: BatchPolicy) -> tuple[Host, LawfulFiles, BatchFusion]:
    fs = LawfulFiles(FILES)
    host = Host()
    host.register("fs", fs)
    return host, fs, BatchFusion(host, policy)


async def test_calls_within_the_wait_share_one_batch_call() -> None:
    host, fs, fusion = setup(BatchPolicy(max_wait=0.05))
    results: dict[str, object] = {}

    async def read(path: str) -> None:
        try:
            results[path] = await fusion.submit(host.bind("fs", "read_text", (path,), {}), Probe())
        except Exception as exc:
            results[path] = type(exc).__name__

    async with anyio.create_task_group() as tg:
        for path in ("f1", "missing", "f3"):
            tg.start_soon(read, path)
    assert fs.physical == [("read_many", ("f1", "missing", "f3"))]
    assert results == {"f1": "one", "missing": "ToolFailure", "f3": "three"}
    stats = fusion.statistics()
    assert (stats.batch_calls, stats.members, stats.served, stats.physical_saved) == (1, 3, 3, 2)


async def test_a_sender_cancelled_while_waiting_lets_its_members_fall_back() -> None:
    host, fs, fusion = setup(BatchPolicy(max_size=3, max_wait=10.0))
    scopes: list[anyio.CancelScope] = []
    results: dict[str, object] = {}

    async def sender() -> None:
        with anyio.CancelScope() as scope:
            scopes.append(scope)
            await fusion.submit(host.bind("fs", "read_text", ("f1",), {}), Probe())

    async def member() -> None:
        results["f2"] = await fusion.submit(host.bind("fs", "read_text", ("f2",), {}), Probe())

    async with anyio.create_task_group() as tg:
        tg.start_soon(sender)
        await wait_until_quiet()  # the sender waits for its batch to fill
        tg.start_soon(member)
        await wait_until_quiet()  # the member joined it and waits too
        scopes[0].cancel()
    assert results == {"f2": "two"}
    assert fs.physical == [("read_text", "f2")]  # the batch never went out; the member ran alone
    assert fusion.statistics().batch_calls == 0

    async def later(path: str) -> None:
        results[path] = await fusion.submit(host.bind("fs", "read_text", (path,), {}), Probe())

    with anyio.fail_after(5):  # later calls open a new (full, so sent at once) batch
        async with anyio.create_task_group() as tg:
            for path in ("f3", "f1", "f2"):
                tg.start_soon(later, path)
    assert results == {"f1": "one", "f2": "two", "f3": "three"}
    assert fs.physical[1] == ("read_many", ("f3", "f1", "f2"))


async def test_other_arguments_split_groups() -> None:
    """Only calls equal in every argument but the batched one share a batch."""
    host, _, fusion = setup(BatchPolicy())
    a = host.bind("fs", "read_text", ("f1",), {})
    assert fusion.fusable(a)
    assert not fusion.fusable(host.bind("fs", "read_lines", ("f1",), {"limit": 1}))
