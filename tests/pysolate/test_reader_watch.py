"""``CodeReader.watched``: one watchdog per stream enforces ``idle_timeout`` and ``deadline``.

The watchdog wakes when a bound could be due and looks again, so an event arriving before
then must push the idle bound on; an error of the reading code must come out as itself;
and a read outside ``watched`` keeps a timeout of its own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from pysolate.streams import CodeReader, StreamTimeout

pytestmark = pytest.mark.anyio


async def _gaps(gap: float, count: int) -> AsyncIterator[str]:
    for i in range(count):
        await anyio.sleep(gap)
        yield f"x{i} = {i}\n"


async def _read_all(reader: CodeReader) -> list[str]:
    texts = []
    async with reader.watched():
        while (text := await reader.read()) is not None:
            texts.append(text)
    return texts


async def test_events_arriving_within_the_idle_bound_never_time_out() -> None:
    # Ten gaps of a fifth of the bound: twice the bound in all, yet never idle for it.
    reader = CodeReader(_gaps(0.06, 10), idle_timeout=0.3)
    texts = await _read_all(reader)
    assert len(texts) == 11 and texts[-1] == ""  # ten lines, then the end of the stream


async def test_a_stall_after_events_times_out_as_idle() -> None:
    async def stalls() -> AsyncIterator[str]:
        yield "x = 1\n"
        await anyio.sleep_forever()
        yield "never"

    reader = CodeReader(stalls(), idle_timeout=0.05)
    with pytest.raises(StreamTimeout, match="idle_timeout"):
        await _read_all(reader)


async def test_the_deadline_ends_a_stream_that_never_idles() -> None:
    reader = CodeReader(_gaps(0.01, 10_000), idle_timeout=5.0, deadline=0.1)
    with pytest.raises(StreamTimeout, match="deadline"):
        await _read_all(reader)


async def test_an_error_of_the_reading_code_comes_out_as_itself() -> None:
    reader = CodeReader(_gaps(0.0, 3), idle_timeout=5.0)
    with pytest.raises(ValueError, match="the consumer failed"):
        async with reader.watched():
            await reader.read()
            raise ValueError("the consumer failed")


async def test_an_outer_cancellation_passes_through() -> None:
    reader = CodeReader(_gaps(10.0, 1), idle_timeout=60.0)
    with anyio.move_on_after(0.05) as outer:
        await _read_all(reader)
    assert outer.cancelled_caught


async def test_a_read_outside_watched_keeps_its_own_timeout() -> None:
    async def stalls() -> AsyncIterator[str]:
        await anyio.sleep_forever()
        yield "never"

    reader = CodeReader(stalls(), idle_timeout=0.05)
    with pytest.raises(StreamTimeout, match="idle_timeout"):
        await reader.read()


async def test_watched_cannot_nest() -> None:
    reader = CodeReader(_gaps(0.0, 1), idle_timeout=5.0)
    async with reader.watched():
        with pytest.raises(RuntimeError, match="already active"):
            async with reader.watched():
                pass
