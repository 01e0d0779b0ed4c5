"""``pysolate._backend``: the loop's clock, sleep and checkpoint looked up once per stream.

The stream paths (``play``, ``CodeReader``) take them once instead of through anyio's
backend lookup per chunk; they must be the same clock and the same scheduling as anyio's
on both backends. Under trio (whose clock a test may replace) they are anyio's own.
"""

from __future__ import annotations

import time

import anyio
import anyio.lowlevel
import pytest

from pysolate._backend import loop_checkpoint, loop_clock, loop_sleep
from pysolate.streams import Chunk, CodeReader, StreamTimeout, play

pytestmark = pytest.mark.anyio
backends = pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])


@backends
async def test_the_same_clock_as_anyio(anyio_backend: str) -> None:
    clock = loop_clock()
    before = anyio.current_time()
    now = clock()
    assert before <= now <= anyio.current_time()
    if anyio_backend == "trio":
        assert (
            clock is anyio.current_time
            and loop_sleep() is anyio.sleep
            and loop_checkpoint() is anyio.lowlevel.checkpoint
        )
    else:
        assert clock is time.monotonic


async def test_checkpoint_lets_other_tasks_run_and_sleep_waits() -> None:
    # asyncio only: its ready queue is FIFO (trio's order is random; there these are anyio's own).
    seen: list[str] = []

    async def other() -> None:
        seen.append("other")

    async with anyio.create_task_group() as tg:
        tg.start_soon(other)
        await loop_checkpoint()()
        seen.append("after checkpoint")
    assert seen == ["other", "after checkpoint"]
    start = anyio.current_time()
    await loop_sleep()(0.02)
    assert anyio.current_time() - start >= 0.02


@backends
async def test_play_keeps_its_schedule_and_the_reader_its_idle_bound(anyio_backend: str) -> None:
    chunks = [Chunk(0.0, "x = 1\n"), Chunk(0.05, "y = 2\n"), Chunk(0.1, "z = 3\n")]
    start = anyio.current_time()
    arrivals = []
    async for _ in play(chunks):
        arrivals.append(anyio.current_time() - start)
    assert [round(a, 2) >= c.t for a, c in zip(arrivals, chunks, strict=True)] == [True, True, True]
    reader = CodeReader(play([Chunk(0.0, "x = 1\n"), Chunk(5.0, "y = 2\n")]), idle_timeout=0.05)
    with pytest.raises(StreamTimeout, match="idle_timeout"):
        async with reader.watched():
            while await reader.read() is not None:
                pass
