"""Sessions: turns against one Guest that keeps its globals, each equal to the sequential session.

Every multi-turn test runs the same turns twice on identical fresh Hosts: once as the
session under test (streamed, speculating) and once as the reference, a fresh session
whose turns all run with ``run_source(..., speculate=False)``; turn N must agree with turn
N of the reference on everything the contract fixes (``pysolate.testing.differences``).
Most tests use the in-process session Guest (fast); the ones about the Guest's own ends
(limits, death, the protocol) use the isolated subprocess Guest.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import anyio
import pytest
from waiting import wait_until

from pysolate import (
    Effect,
    GuestLimits,
    Host,
    RunResult,
    RunStatus,
    SessionBroken,
    SessionBusy,
    SessionClosed,
    SessionExpired,
    SessionLimits,
    SessionState,
)
from pysolate.testing import (
    Script,
    differences,
    in_process_session,
    memory_workspace,
    scripted_tool,
)

pytestmark = pytest.mark.anyio

FILES = {"a.txt": "alpha", "b.txt": "beta", "c.txt": "gamma"}


@dataclass
class Stream:
    """A source streamed in fixed chunks; ``fail_after`` chunks, it raises (a cut stream)."""

    source: str
    size: int = 8
    delay: float = 0.01
    fail_after: int | None = None
    ended_at: float | None = None

    async def __aiter__(self) -> AsyncIterator[str]:
        for n, i in enumerate(range(0, len(self.source), self.size)):
            if self.fail_after is not None and n == self.fail_after:
                raise ConnectionError("model stream dropped")
            await anyio.sleep(self.delay)
            yield self.source[i : i + self.size]
        self.ended_at = anyio.current_time()


def make_host(
    *,
    subprocess: bool = False,
    latency: float = 0.05,
    limits: GuestLimits | None = None,
    share: bool = True,
) -> tuple[Host, object]:
    fs = scripted_tool(
        read=Script(lambda path: f"<{path}>", effect=Effect.PURE, version="1", latency=latency),
        log=Script(lambda line: None, effect=Effect.WRITE, latency=0.001),
    )
    host = Host(
        session_factory=None if subprocess else in_process_session, limits=limits, share=share
    )
    host.register("fs", fs)
    host.register("workspace", memory_workspace(FILES))
    return host, fs


async def reference(turns: Sequence[str], **host_args: object) -> list[RunResult]:
    """The turns run sequentially in a fresh session (the contract's reference)."""
    host, _ = make_host(**host_args)  # type: ignore[arg-type]
    async with host.session() as session:
        return [await session.run_source(t, speculate=False) for t in turns]


def assert_equal_turns(got: Sequence[RunResult], want: Sequence[RunResult]) -> None:
    assert len(got) == len(want)
    for n, (g, w) in enumerate(zip(got, want, strict=True), 1):
        assert differences(g, w) == [], f"turn {n}: {g} != {w}"


TURNS = [
    "paths = ['a.txt', 'b.txt']\ncount = 0\nprint('turn 1')",
    "texts = []\nfor p in paths:\n    texts.append(workspace.read_text(p))\n    count += 1\ntexts",
    "x = fs.read(texts[0]) +\n",  # rejected: changes nothing
    "workspace.write_text('out.txt', ','.join(texts))\nhalf = count // 2\n1 / (count - 2)\nlost = True",
    "print(count, half, 'lost' in globals())\nworkspace.read_text('out.txt')",
    "def upper(s):\n    return s.upper()\nupper(fs.read(paths[1]))",
    "[upper(t) for t in texts]",
]


@pytest.mark.parametrize("subprocess", [False, True], ids=["in-process", "subprocess"])
async def test_every_turn_equals_the_sequential_session(subprocess: bool) -> None:
    """Globals, stdout per turn, a rejected turn, a raising turn (what ran before the
    exception is kept, REPL-like) and workspace writes across turns, streamed with
    speculation, equal the sequential session turn by turn."""
    host, _ = make_host(subprocess=subprocess)
    async with host.session() as session:
        got = [await session.run_stream(Stream(t)) for t in TURNS]
        assert session.workspaces["workspace"].changes() == {"out.txt": b"alpha,beta"}
    assert [r.status for r in got] == ["ok", "ok", "rejected", "error", "ok", "ok", "ok"]
    assert got[4].stdout == "2 1 False\n"  # turn 4 kept what ran before its ZeroDivisionError
    assert got[4].value == "alpha,beta"
    assert got[0].stdout == "turn 1\n"  # each turn's own output only
    assert_equal_turns(got, await reference(TURNS, subprocess=subprocess))


async def test_turn_two_starts_reads_over_turn_one_values_while_streaming() -> None:
    """A plain list bound in turn 1 is known to discovery in turn 2: its reads start before
    turn 2's stream ends and the Guest claims them."""
    host, fs = make_host(latency=0.05)
    turns = [
        "paths = ['a', 'b', 'c']",
        "out = []\nfor p in paths:\n    out.append(fs.read(p))\nn = 1\n"
        + "# padding\n" * 8
        + "out",
    ]
    async with host.session() as session:
        first = await session.run_source(turns[0])
        stream = Stream(turns[1], delay=0.01)
        second = await session.run_stream(stream)
    assert second.value == ["<a>", "<b>", "<c>"]
    assert second.report.claimed == 3 and second.report.physical == 3
    reads = fs.calls_to("read")  # type: ignore[attr-defined]
    assert stream.ended_at is not None and all(c.started < stream.ended_at for c in reads)
    assert_equal_turns([first, second], await reference(turns))


async def test_without_the_earlier_turn_the_same_loop_cannot_start_early() -> None:
    """Control for the test above: in a fresh session ``paths`` is unknown, nothing starts."""
    host, fs = make_host()
    async with host.session() as session:
        result = await session.run_stream(
            Stream("for p in ['a']:\n    x = 1\nfor p in paths:\n    fs.read(p)")
        )
    assert (
        result.status is RunStatus.ERROR
        and result.error is not None
        and result.error.type == "NameError"
    )
    assert fs.calls_to("read") == []  # type: ignore[attr-defined]


async def test_an_opaque_global_is_unknown_code_not_a_builtin() -> None:
    """Turn 1 rebinds ``len`` and binds a function that mutates ``paths``; in turn 2
    neither is taken for what discovery would otherwise assume, so no read starts early on
    a stale ``paths`` (every physical read is one the program made)."""
    host, fs = make_host()
    turns = [
        "paths = ['a']\ndef grow():\n    paths.append('b')\nlen = lambda x: 99",
        "grow()\nfor p in paths:\n    fs.read(p)\nfs.read(str(len(paths)))",
    ]
    async with host.session() as session:
        got = [await session.run_stream(Stream(t)) for t in turns]
        assert session.prior.opaque == frozenset({"grow", "len"})
    assert [c.args for c in fs.calls_to("read")] == [("a",), ("b",), ("99",)]  # type: ignore[attr-defined]
    assert got[1].report.physical == got[1].report.logical == 3
    assert_equal_turns(got, await reference(turns))


async def test_a_retry_after_a_syntax_error_claims_the_rejected_turns_reads() -> None:
    """The model's retry: the rejected turn's settled early reads serve the corrected turn
    (equal key and view), so each read runs once physically, and the result equals the
    sequential session (where the rejected turn did nothing)."""
    host, fs = make_host(latency=0.02)
    body = "a = fs.read('a')\nb = fs.read('b')\nn = 2\n" + "# thinking\n" * 6
    turns = ["n = 1", body + "c = (a +\n", body + "c = a + b\nc"]
    async with host.session() as session:
        got = [await session.run_stream(Stream(t, delay=0.01)) for t in turns]
        assert session.statistics().reused == 2
    assert [r.status for r in got] == ["ok", "rejected", "ok"]
    assert len(fs.calls_to("read")) == 2  # type: ignore[attr-defined]
    assert got[2].report.claimed == 2 and got[2].report.physical == 0
    assert_equal_turns(got, await reference(turns))


async def test_carried_results_do_not_outlive_an_executed_turn() -> None:
    """After a turn ran in the Guest, a rejected turn's early results are no longer reused
    (on a Host that does not share work across runs: one that does may, see below)."""
    host, fs = make_host(latency=0.01, share=False)
    body = "a = fs.read('a')\nn = 2\n" + "# thinking\n" * 4
    turns = [body + "(", "fs.log('state may move')", body + "a"]
    async with host.session() as session:
        got = [await session.run_stream(Stream(t)) for t in turns]
        assert session.statistics().reused == 0
    assert len(fs.calls_to("read")) == 2  # type: ignore[attr-defined]
    assert_equal_turns(got, await reference(turns, share=False))


async def test_a_pure_result_serves_later_turns_whatever_ran_between() -> None:
    """Contract 8: a ``pure`` result depends on its arguments only, so on a sharing Host the
    Host's table serves the later turn's read after a write (one physical read in all)."""
    host, fs = make_host(latency=0.01)
    body = "a = fs.read('a')\nn = 2\n" + "# thinking\n" * 4
    turns = [body + "(", "fs.log('state may move')", body + "a"]
    async with host.session() as session:
        got = [await session.run_stream(Stream(t)) for t in turns]
    assert len(fs.calls_to("read")) == 1  # type: ignore[attr-defined]
    assert got[2].calls[0].shared_from == got[0].run_id
    assert_equal_turns(got, await reference(turns))


async def test_a_cut_stream_changes_nothing() -> None:
    """A turn whose stream fails is aborted before the Guest sees it: no globals, no writes."""
    host, _ = make_host()
    async with host.session() as session:
        await session.run_source("x = 1")
        cut = await session.run_stream(
            Stream("x = 2\nworkspace.write_text('w', 'w')\n", size=6, fail_after=3)
        )
        after = await session.run_source("x")
        assert session.state is SessionState.IDLE
        assert session.workspaces["workspace"].changes() == {}
    assert cut.status is RunStatus.ABORTED and after.value == 1


async def test_a_turn_aborted_in_the_guest_breaks_the_session_and_drops_its_writes() -> None:
    """The wall-time limit stops the Guest mid-turn: that turn is aborted, its writes are
    dropped (earlier turns' stay), and every later turn raises ``SessionBroken``."""
    host, _ = make_host(subprocess=True, limits=GuestLimits(wall_time=1.0))
    async with host.session() as session:
        await session.run_source("workspace.write_text('kept', '1')")
        aborted = await session.run_source(
            "workspace.write_text('dropped', '2')\nwhile True:\n    pass"
        )
        assert aborted.status is RunStatus.ABORTED and aborted.error is not None
        assert aborted.error.type == "WallTimeLimit"
        assert session.state is SessionState.BROKEN
        with pytest.raises(SessionBroken, match="WallTimeLimit") as info:
            await session.run_source("1")
        assert info.value.reason == aborted.error
        assert session.workspaces["workspace"].changes() == {"kept": b"1"}


async def test_cancelling_a_turn_the_guest_runs_breaks_the_session() -> None:
    host, _ = make_host(latency=5.0)
    async with host.session() as session:
        with anyio.move_on_after(0.3):
            await session.run_source("fs.read('slow')")
        assert session.state is SessionState.BROKEN
        with pytest.raises(SessionBroken):
            await session.run_source("1")


async def test_cancelling_a_turn_still_streaming_changes_nothing() -> None:
    host, _ = make_host()
    async with host.session() as session:
        await session.run_source("x = 1")
        with anyio.move_on_after(0.05):
            await session.run_stream(Stream("x = 2\n" * 50, delay=0.05))
        assert session.state is SessionState.IDLE
        assert (await session.run_source("x")).value == 1


async def test_an_idle_session_expires() -> None:
    """Past ``idle_time`` between turns the Guest is stopped; the next turn says so."""
    host, _ = make_host(subprocess=True)
    async with host.session(SessionLimits(idle_time=0.3)) as session:
        assert (await session.run_source("x = 1\nx")).value == 1
        assert session._guest is not None
        process = session._guest._guest._process  # type: ignore[attr-defined]
        await wait_until(lambda: process.returncode is not None, what="the idle Guest stopped")
        assert session.state is SessionState.BROKEN
        with pytest.raises(SessionExpired, match="idle"):
            await session.run_source("x")


async def test_a_session_past_its_wall_time_expires() -> None:
    host, _ = make_host()
    async with host.session(SessionLimits(wall_time=0.3, idle_time=60)) as session:
        await session.run_source("x = 1")
        await wait_until(lambda: session.state is SessionState.BROKEN, what="the session expired")
        with pytest.raises(SessionExpired):
            await session.run_source("x")


async def test_turns_are_sequential_and_only_inside_the_block() -> None:
    host, _ = make_host(latency=0.2)
    session = host.session()
    with pytest.raises(SessionClosed):
        await session.run_source("1")
    async with session, anyio.create_task_group() as tg:
        tg.start_soon(session.run_source, "fs.read('a')")
        await wait_until(lambda: session.state is SessionState.RUNNING, what="the first turn began")
        with pytest.raises(SessionBusy):
            await session.run_source("1")
    with pytest.raises(SessionClosed):
        await session.run_source("1")
    assert session.state is SessionState.CLOSED


async def test_a_guest_that_cannot_start_breaks_the_session() -> None:
    async def failing(capabilities: object, limits: object) -> object:
        raise OSError("no Guest today")

    host = Host(session_factory=failing)  # type: ignore[arg-type]
    async with host.session() as session:
        first = await session.run_source("1")
        assert first.status is RunStatus.ABORTED and first.error is not None
        assert first.error.type == "OSError" and "no Guest today" in first.error.message
        with pytest.raises(SessionBroken, match="no Guest today"):
            await session.run_source("1")


async def test_rejected_turns_do_not_start_the_guest_work() -> None:
    """A rejected turn never reaches the Guest: no write, whatever it contains."""
    host, fs = make_host()
    async with host.session() as session:
        result = await session.run_stream(Stream("fs.log('x')\nworkspace.write_text('a', 'b')\n)"))
    assert result.status is RunStatus.REJECTED
    assert fs.calls_to("log") == []  # type: ignore[attr-defined]


@pytest.mark.parametrize("subprocess", [False, True], ids=["in-process", "subprocess"])
async def test_function_tools_are_globals_of_every_turn(subprocess: bool) -> None:
    """A registered function tool is a global in every turn, never reported as a global the
    turns left, and its early calls over an earlier turn's list are claimed."""
    from pysolate import capability

    @capability(effect=Effect.PURE, version="1")
    async def shout(text: str) -> str:
        await anyio.sleep(0.02)
        return text.upper()

    def host_with_function() -> Host:
        host, _ = make_host(subprocess=subprocess)
        host.register("shout", shout)
        return host

    turns = [
        "words = ['a', 'b']",
        "loud = [shout(w) for w in words]\nn = 1\n" + "# pad\n" * 5 + "loud",
    ]
    host = host_with_function()
    async with host.session() as session:
        got = [await session.run_stream(Stream(t)) for t in turns]
        assert "shout" not in session.prior.known and "shout" not in session.prior.opaque
    assert got[1].value == ["A", "B"] and got[1].report.claimed == 2
    ref_host = host_with_function()
    async with ref_host.session() as ref:
        want = [await ref.run_source(t, speculate=False) for t in turns]
    assert_equal_turns(got, want)


def test_the_session_example_runs() -> None:
    """examples/session.py: turn 2's reads over turn 1's list are claimed, the typo turn is
    rejected, and its retry reuses the read the rejected turn made."""
    import subprocess
    import sys
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "examples" / "session.py"
    done = subprocess.run(
        [sys.executable, "-W", "always::ResourceWarning", str(example)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "ResourceWarning" not in done.stderr, done.stderr  # it leaves nothing open
    lines = done.stdout.splitlines()
    assert lines[1].startswith("turn 2: ok ['retry fix', 'cache bug', 'rate limits'] claimed=3")
    assert lines[2].startswith("turn 3: rejected")
    assert lines[3].endswith("claimed=1 physical=0")
    assert lines[4] == "reused from the rejected turn: 1"
