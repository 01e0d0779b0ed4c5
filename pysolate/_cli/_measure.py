"""Timing a run the way the user waits for it: from the first chunk, and after the last one."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass

import anyio

from .._report._result import RunResult
from .._run._host import Host
from ..streams import Code, decode_program


@dataclass(slots=True)
class _Clock:
    """When a stream started and ended (``anyio.current_time``); ``ended`` None while open."""

    started: float
    ended: float | None = None


@dataclass(frozen=True, slots=True)
class Measured:
    """A run's result and the CLI's own timings of it."""

    result: RunResult
    wall_seconds: float
    stream_seconds: float

    @property
    def after_stream_seconds(self) -> float:
        """From the last chunk to the result: what the user waits for once the model is done."""
        return max(0.0, self.wall_seconds - self.stream_seconds)

    def timings(self) -> dict[str, float]:
        return {
            "wall_seconds": round(self.wall_seconds, 6),
            "stream_seconds": round(self.stream_seconds, 6),
            "after_stream_seconds": round(self.after_stream_seconds, 6),
        }


async def _timed(chunks: AsyncIterable[str], clock: _Clock) -> AsyncIterator[str]:
    async for chunk in chunks:
        yield chunk
    clock.ended = anyio.current_time()


async def measure_stream(host: Host, chunks: AsyncIterable[str], *, code: Code) -> Measured:
    """Run ``chunks`` through ``host.run_stream`` and time it.

    Cancellation propagates (``run_stream`` stops early work and the Guest first).
    """
    clock = _Clock(anyio.current_time())
    result = await host.run_stream(_timed(chunks, clock), code=code)
    end = anyio.current_time()
    stream_end = clock.ended if clock.ended is not None else end
    return Measured(result, end - clock.started, stream_end - clock.started)


async def measure_baseline(host: Host, chunks: AsyncIterable[str], *, code: Code) -> Measured:
    """The way without Pysolate: wait for the whole stream, then run the code sequentially.

    Cancellation propagates (``run_source`` stops the Guest first).
    """
    start = anyio.current_time()
    parts = [chunk async for chunk in chunks]
    streamed = anyio.current_time()
    result = await host.run_source(await decode_program(parts, code), speculate=False)
    end = anyio.current_time()
    return Measured(result, end - start, streamed - start)
