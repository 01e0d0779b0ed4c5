"""Session mode of the differential suite: every turn equals the sequential session's turn.

Each generated session (``sessions``: turns that use what earlier turns left, rejected
turns with and without their retry, turns that raise, cut streams) runs twice on fresh
Hosts: streamed with speculation under the case's ``Conditions`` (random chunking, pauses,
latencies, failures, lane policies, markdown), and as the reference, a fresh session whose
turns run with ``run_source(speculate=False)`` (a cut turn is never sent there: it must
be ``aborted`` having run nothing). Checked for every turn: equal status, value, stdout,
error, call log and workspace state; the accounting invariants; no live read, write or
unknown call started before that turn's stream ended, none replayed.

The default run is derandomized: ``DEFAULT_SESSIONS`` through the in-process Guest and a
sample through the subprocess Guest; ``-m soak`` runs ``SOAK_SESSIONS`` more.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import anyio
import pytest
from example_counts import DIFFERENTIAL, examples
from hypothesis import example, given, settings

from pysolate import LanePolicy, RunResult, RunStatus
from pysolate._guest_api import SessionGuestFactory
from pysolate._report._equivalence import same
from pysolate.testing import check_invariants, in_process_session, observable

from .apis import Api
from .apis import session as session_of
from .harness import UNSAFE, TimedChunks, Tools, build_host, stream_of
from .programs import Conditions, conditions
from .sessions import Turn, sessions

DEFAULT_SESSIONS = examples(40, full=80)
SUBPROCESS_SESSIONS = examples(6, full=12)
SYNC_SESSIONS = examples(12, full=25)
"""Sessions the default run also drives through the blocking API (``SyncSession``)."""
SOAK_SESSIONS = 3_000

_SLOW_READS = Conditions(
    chunk_sizes=(4,),
    pauses=(0.003,),
    latencies={"docs.search": 0.004, "docs.fetch": 0.004},
    failing=frozenset({"bad"}),
    policy=LanePolicy(allow_discardable=True),
)


@dataclass(slots=True)
class _Cut:
    """The first half of a stream, then the stream fails (the model's connection drops)."""

    inner: TimedChunks
    keep: int

    async def __aiter__(self) -> AsyncIterator[str]:
        sent = 0
        async for chunk in self.inner:
            if sent + len(chunk) >= self.keep:
                yield chunk[: self.keep - sent]
                raise ConnectionError("model stream dropped")
            sent += len(chunk)
            yield chunk

    def blocking(self) -> Iterator[str]:
        sent = 0
        for chunk in self.inner.blocking():
            if sent + len(chunk) >= self.keep:
                yield chunk[: self.keep - sent]
                raise ConnectionError("model stream dropped")
            sent += len(chunk)
            yield chunk


@dataclass(slots=True)
class _Window:
    """When one streamed turn started, when its stream ended, when it returned."""

    started: float
    stream_ended: float | None
    ended: float


async def _speculative(
    turns: tuple[Turn, ...], case: Conditions, factory: SessionGuestFactory, api: Api
) -> tuple[list[RunResult], list[_Window], Tools, dict[str, object]]:
    host, tools = build_host(case, session_factory=factory)
    results, windows = [], []
    async with session_of(api, host) as session:
        for turn in turns:
            chunks = stream_of(turn.source, case)
            stream = _Cut(chunks, max(1, len(chunks.source) // 2)) if turn.kind == "cut" else chunks
            started = anyio.current_time()
            result = await session.run_stream(
                stream, code="markdown" if case.markdown else "raw", policy=case.policy
            )
            results.append(result)
            windows.append(_Window(started, chunks.ended, anyio.current_time()))
    return results, windows, tools, host.method_specs()  # type: ignore[return-value]


async def _reference(
    turns: tuple[Turn, ...], case: Conditions, factory: SessionGuestFactory, api: Api
) -> list[RunResult | None]:
    host, _ = build_host(case, session_factory=factory)
    async with session_of(api, host) as session:
        return [
            None if t.kind == "cut" else await session.run_source(t.source, speculate=False)
            for t in turns
        ]


def _check(
    turns: tuple[Turn, ...],
    case: Conditions,
    factory: SessionGuestFactory = in_process_session,
    api: Api = "async",
) -> None:
    async def both() -> tuple[
        list[RunResult | None], tuple[list[RunResult], list[_Window], Tools, dict[str, object]]
    ]:
        return await _reference(turns, case, factory, api), await _speculative(
            turns, case, factory, api
        )

    reference, (got, windows, tools, specs) = anyio.run(both)
    program = "\n".join(f"--- turn {n} ({t.kind})\n{t.source}" for n, t in enumerate(turns, 1))
    for n, (ref, result, window, turn) in enumerate(
        zip(reference, got, windows, turns, strict=True), 1
    ):
        assert result.guest_status != "limit", (
            f"turn {n} hit a Guest limit:\n{program}\n{result.error}"
        )
        check_invariants(result, specs)  # type: ignore[arg-type]
        if ref is None:
            assert result.status is RunStatus.ABORTED and result.calls == (), (
                f"turn {n}:\n{program}"
            )
        else:
            want, have = observable(ref), observable(result)
            for name in want:
                assert same(have[name], want[name]), (
                    f"turn {n}: {name} differs\n{program}\nreference: {want[name]!r}\nspeculative: {have[name]!r}"
                )
        for cap, method in sorted(UNSAFE):
            made = [
                c
                for c in tools.by_name()[cap].calls_to(method)
                if window.started <= c.started <= window.ended
            ]
            ended = window.stream_ended if turn.kind != "cut" else None
            assert all(ended is not None and c.started >= ended for c in made), (
                f"turn {n}: early {cap}.{method}\n{program}"
            )
            receipts = [c for c in result.calls if (c.capability, c.method) == (cap, method)]
            assert len(made) == len(receipts), f"turn {n}: {cap}.{method} replayed\n{program}"


@settings(DIFFERENTIAL, max_examples=DEFAULT_SESSIONS)
@given(sessions(), conditions())
@example(
    (
        Turn("ok", "xs = docs.search('alpha')\nxs\n"),
        Turn("rejected", "ys = [docs.fetch(x) for x in xs]\nn = 1\nx = (\n"),
        Turn("ok", "ys = [docs.fetch(x) for x in xs]\nn = 1\nys\n"),
        Turn("raises", "workspace.write_text('out.txt', ys[0])\nraise ValueError('turn failed')\n"),
        Turn("ok", "workspace.read_text('out.txt')\n"),
    ),
    _SLOW_READS,
)
def test_sessions_equal_sequential_sessions(turns: tuple[Turn, ...], case: Conditions) -> None:
    """Every turn of a streamed, speculating session == the sequential session's turn."""
    _check(turns, case)


@settings(DIFFERENTIAL, max_examples=SUBPROCESS_SESSIONS)
@given(sessions(max_turns=3, max_statements=3), conditions())
def test_sessions_equal_sequential_sessions_subprocess(
    turns: tuple[Turn, ...], case: Conditions
) -> None:
    """The same property through the isolated subprocess Guest (a sample)."""
    from pysolate._guest import start_subprocess_session

    _check(turns, case, start_subprocess_session)


@settings(DIFFERENTIAL, max_examples=SYNC_SESSIONS)
@given(sessions(), conditions())
def test_blocking_sessions_equal_sequential_sessions(
    turns: tuple[Turn, ...], case: Conditions
) -> None:
    """The same property through the blocking API: ``SyncSession`` turns from a sync
    caller's thread, the streams blocking iterators (reference and streamed alike)."""
    _check(turns, case, api="sync")


@pytest.mark.soak
@settings(DIFFERENTIAL, max_examples=SOAK_SESSIONS)
@given(sessions(max_turns=6, max_statements=6), conditions())
def test_sessions_soak(turns: tuple[Turn, ...], case: Conditions) -> None:
    """More and longer sessions: only with ``-m soak``."""
    _check(turns, case)
