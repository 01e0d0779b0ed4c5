"""``CodeReader.watched``: one watchdog per stream enforces ``idle_timeout`` and ``deadline``.

The watchdog wakes when a bound could be due and looks again, so an event arriving before
then must push the idle bound on; an error of the reading code must come out as itself;
and a read outside ``watched`` keeps a timeout of its own. Each holds whether the watchdog
runs in a task group of its own or in the caller's (as a run's ``_seal`` gives it), where
the block ends without waiting for the watchdog to return.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest
from trio.testing import MockClock

from pysolate.streams import CodeReader, StreamTimeout

pytestmark = pytest.mark.anyio


async def _gaps(gap: float, count: int) -> AsyncIterator[str]:
    for i in range(count):
        await anyio.sleep(gap)
        yield f"x{i} = {i}\n"


@pytest.fixture(params=["own task group", "caller's task group"])
def in_callers_group(request: pytest.FixtureRequest) -> bool:
    return request.param == "caller's task group"


async def _read_all(reader: CodeReader, in_callers_group: bool = False) -> list[str]:
    texts: list[str] = []
    if not in_callers_group:
        async with reader.watched():
            while (text := await reader.read()) is not None:
                texts.append(text)
        return texts
    error: Exception | None = None
    async with anyio.create_task_group() as tg:
        try:  # as ``_seal`` does: the reader's errors do not reach the task group
            async with reader.watched(tg):
                while (text := await reader.read()) is not None:
                    texts.append(text)
        except Exception as exc:
            error = exc
    if error is not None:
        raise error
    return texts


async def test_events_arriving_within_the_idle_bound_never_time_out(in_callers_group: bool) -> None:
    # Ten gaps of a fifth of the bound: twice the bound in all, yet never idle for it.
    reader = CodeReader(_gaps(0.06, 10), idle_timeout=0.3)
    texts = await _read_all(reader, in_callers_group)
    assert len(texts) == 11 and texts[-1] == ""  # ten lines, then the end of the stream


async def test_a_stall_after_events_times_out_as_idle(in_callers_group: bool) -> None:
    async def stalls() -> AsyncIterator[str]:
        yield "x = 1\n"
        await anyio.sleep_forever()
        yield "never"

    reader = CodeReader(stalls(), idle_timeout=0.05)
    with pytest.raises(StreamTimeout, match="idle_timeout"):
        await _read_all(reader, in_callers_group)


async def test_the_deadline_ends_a_stream_that_never_idles(in_callers_group: bool) -> None:
    reader = CodeReader(_gaps(0.01, 10_000), idle_timeout=5.0, deadline=0.1)
    with pytest.raises(StreamTimeout, match="deadline"):
        await _read_all(reader, in_callers_group)


async def test_an_error_of_the_reading_code_comes_out_as_itself() -> None:
    reader = CodeReader(_gaps(0.0, 3), idle_timeout=5.0)
    with pytest.raises(ValueError, match="the consumer failed"):
        async with reader.watched():
            await reader.read()
            raise ValueError("the consumer failed")


async def test_an_outer_cancellation_passes_through(in_callers_group: bool) -> None:
    reader = CodeReader(_gaps(10.0, 1), idle_timeout=60.0)
    with anyio.move_on_after(0.05) as outer:
        await _read_all(reader, in_callers_group)
    assert outer.cancelled_caught


async def test_an_error_in_the_callers_group_comes_out_as_itself() -> None:
    reader = CodeReader(_gaps(0.0, 3), idle_timeout=5.0)
    with pytest.raises(ValueError, match="the consumer failed"):
        async with anyio.create_task_group() as tg:
            try:
                async with reader.watched(tg):
                    await reader.read()
                    raise ValueError("the consumer failed")
            except ValueError as exc:
                error = exc
        raise error


async def test_in_the_callers_group_the_block_ends_before_the_watchdog_returns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The point of the caller's group: the end of the stream waits for no trip round the loop.
    events: list[str] = []
    watch = CodeReader._watch

    async def noted(self: CodeReader, reads: anyio.CancelScope, done: anyio.Event) -> None:
        await watch(self, reads, done)
        events.append("watchdog returned")

    monkeypatch.setattr(CodeReader, "_watch", noted)
    async with anyio.create_task_group() as tg:
        reader = CodeReader(_gaps(0.0, 3), idle_timeout=5.0)
        async with reader.watched(tg):
            while await reader.read() is not None:
                pass
        events.append("block ended")
    assert events == ["block ended", "watchdog returned"]
    events.clear()
    await _read_all(CodeReader(_gaps(0.0, 3), idle_timeout=5.0))  # its own group: waited for
    assert events == ["watchdog returned"]


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


def test_host_work_between_reads_is_not_the_models_silence() -> None:
    """Issue 36, divergence 4: the idle bound counts only a read's own wait. Under trio's
    mock clock the consumer spends five idle bounds of (virtual) time on its own work
    between reads, with no checkpoint, as a long chunk's discovery does; the model's own
    gaps are a tenth of the bound. No timeout - while a true silence of twice the bound
    still is one."""

    async def busy_consumer(gap: float, clock: MockClock) -> list[str]:
        reader = CodeReader(_gaps(gap, 3), idle_timeout=1.0)
        texts: list[str] = []
        async with reader.watched():
            while (text := await reader.read()) is not None:
                texts.append(text)
                clock.jump(
                    5.0
                )  # the Host's work on what it read: time passes, the loop does not run
        return texts

    def run(gap: float) -> list[str]:
        clock = MockClock(autojump_threshold=0)  # the model's gaps pass at once too
        return anyio.run(
            busy_consumer, gap, clock, backend="trio", backend_options={"clock": clock}
        )

    assert run(0.1) == ["x0 = 0\n", "x1 = 1\n", "x2 = 2\n", ""]
    with pytest.raises(StreamTimeout, match="idle_timeout"):
        run(2.0)
