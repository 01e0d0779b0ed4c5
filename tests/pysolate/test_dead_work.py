"""Dead provisional work is released at once (issue 36, divergence 3 / item 4).

``for d in ids: r = docs.fetch(d)`` streams, and every iteration's read starts early
(provisional: a ``break`` may still follow). Then ``break`` streams: the later iterations
can no longer be reached. Their reads here never end by themselves (a slow service), so if
they kept the lane's eight slots the next certain read could never start and the Guest's
claim of it would wait until the run's wall time: the sequential run is ``ok``, the
streamed one was ``aborted: WallTimeLimit`` (since issue 36 item 1 the Guest's call runs
itself instead of waiting for a queued twin; the dead reads still held every slot). The
sequential run is the oracle (status, value, error, call log); the dead reads must end
``cancelled``, never complete, and ``z``'s early read must start and be claimed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from pysolate import Effect, GuestLimits, Host, RunResult, capability
from pysolate.testing import differences, in_process_guest, in_process_session

pytestmark = pytest.mark.anyio

IDS = [f"d{i}" for i in range(12)]
SOURCE = (
    f'ids = {IDS!r}\nfor d in ids:\n    r = docs.fetch(d)\n    break\nz = docs.fetch("z")\n(r, z)\n'
)
LIMITS = GuestLimits(wall_time=10.0)
"""Far beyond the run (well under a second), far below the dead reads' hour."""


class Docs:
    """``fetch`` answers ``d0`` and ``z`` at once; every other document takes an hour."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.finished: list[str] = []

    @capability(effect=Effect.IMMUTABLE_READ, version="1")
    async def fetch(self, doc: str) -> str:
        self.started.append(doc)
        if doc not in ("d0", "z"):
            await anyio.sleep(3600)
        self.finished.append(doc)
        return doc.upper()


def make_host() -> tuple[Host, Docs]:
    docs = Docs()
    host = Host(guest_factory=in_process_guest, session_factory=in_process_session, limits=LIMITS)
    host.register("docs", docs)
    return host, docs


async def lines(source: str) -> AsyncIterator[str]:
    for line in source.splitlines(keepends=True):
        yield line
        await anyio.sleep(0.02)


async def oracle(source: str = SOURCE) -> RunResult:
    return await make_host()[0].run_source(source, speculate=False)


def assert_released(result: RunResult, docs: Docs, reference: RunResult) -> None:
    assert differences(reference, result) == [], (result.status, result.error)
    assert result.value == ("D0", "Z")
    dead = [d for d in docs.started if d not in ("d0", "z")]
    assert dead, "the later iterations did start early (the case under test)"
    assert not [d for d in docs.finished if d not in ("d0", "z")]
    assert result.report.cancelled == len(IDS) - 1, "every dead iteration: started or still queued"
    assert [c.lane for c in result.calls] == ["claimed", "claimed"], (
        "z's early read got a slot and was claimed"
    )


async def test_a_break_releases_the_later_iterations_slots() -> None:
    reference = await oracle()
    host, docs = make_host()
    result = await host.run_stream(lines(SOURCE))
    assert_released(result, docs, reference)


async def test_two_concurrent_runs_on_one_host_each_release_their_dead_work() -> None:
    reference = await oracle()
    host, docs = make_host()
    results: list[RunResult] = []

    async def one() -> None:
        results.append(await host.run_stream(lines(SOURCE)))

    async with anyio.create_task_group() as tg:
        tg.start_soon(one)
        tg.start_soon(one)
    for result in results:
        assert differences(reference, result) == [], (result.status, result.error)
    assert not [d for d in docs.finished if d not in ("d0", "z")]
    assert [r.report.cancelled for r in results] == [len(IDS) - 1] * 2


async def test_a_session_turn_after_a_break_is_not_held_by_the_dead_work() -> None:
    second = 'w = docs.fetch("z")\nw\n'
    reference_host = make_host()[0]
    async with reference_host.session() as session:
        references = [
            await session.run_source(SOURCE, speculate=False),
            await session.run_source(second, speculate=False),
        ]
    host, docs = make_host()
    async with host.session() as session:
        results = [await session.run_stream(lines(SOURCE)), await session.run_stream(lines(second))]
    for reference, result in zip(references, results, strict=True):
        assert differences(reference, result) == [], (result.status, result.error)
    assert not [d for d in docs.finished if d not in ("d0", "z")]
    assert results[0].report.cancelled == len(IDS) - 1, (
        "released by the break, not left to the session"
    )
