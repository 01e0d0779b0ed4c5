"""The blocking API (``SyncHost``, ``SyncSession``) against the async one, case by case.

Each contract case runs through both APIs (the ``api`` fixture; ``equivalence/apis.py``
runs the blocking calls from a worker thread with the stream as a blocking iterator) and
must give the same: a streamed run equals its sequential reference and claims early; an
error keeps its line, a syntax error is rejected, a failing stream aborted, none running
an unsafe call; a stall ends at ``idle_timeout`` (for a blocking ``next()`` too); misuse is
the same ``TypeError``/``ValueError``; sessions keep globals and refuse a second turn.
Then what only the blocking API has: the sync SDK clients' streams, a blocking stream read
off the event loop, Ctrl-C (a real SIGINT to a subprocess, both APIs side by side), and
its lifecycle.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anthropic
import anyio
import openai
import pytest

from occurrences import Effect
from pysolate import CodeTool, Host, SessionBusy, SessionClosed, SyncHost
from pysolate.testing import (
    Script,
    ScriptedTool,
    in_process_guest,
    in_process_session,
    observable,
    scripted_tool,
)

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "examples"))
from equivalence.apis import APIS, Api, run_source, run_stream, session  # noqa: E402
from fake_llm import FakeModel  # noqa: E402
from waiting import wait_until  # noqa: E402

pytestmark = pytest.mark.anyio

PROGRAM = "a = docs.search('alpha')\nb = docs.search('beta')\nnotes.save(a + b)\nprint(len(a + b))\n[a, b]\n"


@pytest.fixture(params=APIS)
def api(request: pytest.FixtureRequest) -> Api:
    return request.param  # type: ignore[no-any-return]


def make_host(latency: float = 0.05) -> tuple[Host, ScriptedTool, ScriptedTool]:
    docs = scripted_tool(
        search=Script(lambda q: [f"hit:{q}"], effect=Effect.PURE, version="1", latency=latency)
    )
    notes = scripted_tool(save=Script(lambda items: len(items), effect=Effect.WRITE))
    host = Host(guest_factory=in_process_guest, session_factory=in_process_session)
    host.register("docs", docs)
    host.register("notes", notes)
    return host, docs, notes


class Chunks:
    """``source`` in chunks of ``size`` with ``pause`` seconds between them, async or
    blocking (``blocking()``); ``taken`` counts the chunks read so far, ``ended`` is when the
    last one was; ``fail`` raises after the first chunk, ``stall`` seconds pass after it."""

    def __init__(
        self,
        source: str,
        size: int = 6,
        pause: float = 0.01,
        *,
        fail: bool = False,
        stall: float = 0.0,
    ) -> None:
        self.pieces = [source[i : i + size] for i in range(0, len(source), size)]
        self.pause, self.fail, self.stall = pause, fail, stall
        self.taken = 0
        self.ended: float | None = None

    def _after(self, n: int) -> float:
        if n == 0 and self.fail:
            raise ConnectionError("model stream dropped")
        return self.stall if n == 0 and self.stall else self.pause

    async def __aiter__(self) -> AsyncIterator[str]:
        for n, piece in enumerate(self.pieces):
            self.taken += 1
            yield piece
            await anyio.sleep(self._after(n))
        self.ended = anyio.current_time()

    def blocking(self) -> Iterator[str]:
        for n, piece in enumerate(self.pieces):
            self.taken += 1
            yield piece
            time.sleep(self._after(n))
        self.ended = time.monotonic()


# -- the contract, through both APIs ---------------------------------------------------------------


async def test_a_streamed_run_equals_its_reference_and_claims_early(api: Api) -> None:
    host, docs, notes = make_host()
    chunks = Chunks(PROGRAM)
    result = await run_stream(api, host, chunks)
    reference = await run_source(api, make_host()[0], PROGRAM, speculate=False)
    assert (
        result.status == "ok"
        and result.value == [["hit:alpha"], ["hit:beta"]]
        and result.stdout == "2\n"
    )
    assert observable(result) == observable(reference)
    assert [c.lane for c in result.calls] == ["claimed", "claimed", "direct"]
    assert chunks.ended is not None
    assert (
        all(c.started < chunks.ended for c in docs.calls) and notes.calls[0].started >= chunks.ended
    )


@pytest.mark.parametrize(
    ("source", "status", "error", "line"),
    [
        ("x = docs.search('a')\nnotes.save(x)\n1 / 0\n", "error", "ZeroDivisionError", 3),
        ("x = docs.search('a')\nnotes.save(x)\ny = (\n", "rejected", "SyntaxError", 3),
    ],
)
async def test_errors_and_rejections_are_the_same(
    api: Api, source: str, status: str, error: str, line: int
) -> None:
    host, _, notes = make_host()
    result = await run_stream(api, host, Chunks(source))
    assert (
        result.status,
        result.error and result.error.type,
        result.error and result.error.line,
    ) == (status, error, line)
    assert observable(result) == observable(
        await run_source(api, make_host()[0], source, speculate=False)
    )
    assert len(notes.calls) == (1 if status == "error" else 0)


async def test_a_failing_stream_is_aborted_and_runs_nothing_unsafe(api: Api) -> None:
    host, _, notes = make_host()
    result = await run_stream(api, host, Chunks(PROGRAM, size=40, fail=True))
    assert result.status == "aborted" and result.error is not None
    assert (result.error.type, result.error.message) == (
        "ConnectionError",
        "the stream failed: model stream dropped",
    )
    assert result.calls == () and notes.calls == []


async def test_a_stalled_stream_ends_at_idle_timeout(api: Api) -> None:
    """A blocking ``next()`` that does not return is interrupted too (its thread abandoned)."""
    host, _, notes = make_host()
    started = time.monotonic()
    result = await run_stream(api, host, Chunks(PROGRAM, size=40, stall=5.0), idle_timeout=0.3)
    assert (
        result.status == "aborted"
        and result.error is not None
        and result.error.type == "StreamTimeout"
    )
    assert time.monotonic() - started < 4.0  # not the 5 s stall
    assert notes.calls == []


@pytest.mark.parametrize(
    ("chunks", "code", "error", "message"),
    [
        ("x = 1", None, TypeError, r"not a single str: pass \[text\] for one chunk"),
        (
            42,
            None,
            TypeError,
            "expected an async or sync iterable of chunks or SDK events, not int",
        ),
        (["x = 1\n"], "md", ValueError, "unknown code format 'md'"),
    ],
)
async def test_misuse_is_the_same_error_at_the_call(
    api: Api, chunks: object, code: object, error: type, message: str
) -> None:
    host, _, _ = make_host()
    with pytest.raises(error, match=message):
        await run_stream(api, host, chunks, code=code)


async def test_sessions_keep_globals_and_refuse_a_second_turn_at_once(api: Api) -> None:
    host, _, notes = make_host()
    async with session(api, host) as turns:
        assert (await turns.run_source("xs = docs.search('a')\n", speculate=False)).status == "ok"
        rejected = await turns.run_stream(Chunks("ys = xs + xs\nnotes.save(ys)\nz = (\n"))
        assert rejected.status == "rejected" and notes.calls == []
        turn = await turns.run_stream(Chunks("ys = [docs.search(x) for x in xs]\nys\n"))
        assert turn.value == [["hit:hit:a"]] and [c.lane for c in turn.calls] == ["claimed"]
        with anyio.fail_after(10):
            async with anyio.create_task_group() as group:
                running = Chunks("docs.search('b')\n", pause=0.2)
                group.start_soon(turns.run_stream, running)
                await wait_until(lambda: running.taken, what="the first turn read its stream")
                with pytest.raises(SessionBusy):
                    await turns.run_source("1\n")


async def test_a_closed_session_refuses_turns(api: Api) -> None:
    host, _, _ = make_host()
    if api == "async":
        async with host.session() as turns:
            pass
        with pytest.raises(SessionClosed):
            await turns.run_source("1\n")
        return
    with SyncHost(host) as sync:
        with sync.session() as blocking:
            pass
        with pytest.raises(SessionClosed):
            blocking.run_source("1\n")


# -- what only the blocking API has ---------------------------------------------------------------


def sync_sdk_runs() -> dict[str, Any]:
    def chat_create(host: SyncHost, tool: CodeTool, model: FakeModel) -> Any:
        client = openai.OpenAI(api_key="k", http_client=model.sync_client())
        stream = client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "go"}],
            tools=[tool.openai_chat()],
            stream=True,
        )  # type: ignore[list-item]
        return host.run_stream(stream, code=tool.code)

    def chat_helper(host: SyncHost, tool: CodeTool, model: FakeModel) -> Any:
        client = openai.OpenAI(api_key="k", http_client=model.sync_client())
        with client.chat.completions.stream(
            model="m", messages=[{"role": "user", "content": "go"}], tools=[tool.openai_chat()]
        ) as stream:  # type: ignore[list-item]
            return host.run_stream(stream, code=tool.code)

    def responses_create(host: SyncHost, tool: CodeTool, model: FakeModel) -> Any:
        client = openai.OpenAI(api_key="k", http_client=model.sync_client())
        stream = client.responses.create(
            model="m", input="go", tools=[tool.openai_responses()], stream=True
        )  # type: ignore[list-item]
        return host.run_stream(stream, code=tool.code)

    def responses_helper(host: SyncHost, tool: CodeTool, model: FakeModel) -> Any:
        client = openai.OpenAI(api_key="k", http_client=model.sync_client())
        with client.responses.stream(
            model="m", input="go", tools=[tool.openai_responses()]
        ) as stream:  # type: ignore[list-item]
            return host.run_stream(stream, code=tool.code)

    def messages_create(host: SyncHost, tool: CodeTool, model: FakeModel) -> Any:
        client = anthropic.Anthropic(api_key="k", http_client=model.sync_client())
        stream = client.messages.create(
            model="m",
            max_tokens=9,
            messages=[{"role": "user", "content": "go"}],
            tools=[tool.anthropic()],
            stream=True,
        )  # type: ignore[list-item]
        return host.run_stream(stream, code=tool.code)

    def messages_helper(host: SyncHost, tool: CodeTool, model: FakeModel) -> Any:
        client = anthropic.Anthropic(api_key="k", http_client=model.sync_client())
        with client.messages.stream(
            model="m",
            max_tokens=9,
            messages=[{"role": "user", "content": "go"}],
            tools=[tool.anthropic()],
        ) as stream:  # type: ignore[list-item]
            return host.run_stream(stream, code=tool.code)

    return {
        f.__name__: f
        for f in (
            chat_create,
            chat_helper,
            responses_create,
            responses_helper,
            messages_create,
            messages_helper,
        )
    }


@pytest.mark.parametrize("way", sorted(sync_sdk_runs()))
def test_the_sync_sdk_streams_run_and_claim_early(way: str) -> None:
    host, _, notes = make_host()
    with SyncHost(host) as sync:
        result = sync_sdk_runs()[way](
            sync, CodeTool(sync), FakeModel(PROGRAM, tokens_per_second=500)
        )
        reference = sync.run_source(PROGRAM, speculate=False)
    assert result.status == "ok", result.error
    assert observable(result) == observable(reference)
    assert [c.lane for c in result.calls] == ["claimed", "claimed", "direct"]
    assert len(notes.calls) == 2  # the run's write and the reference's


def test_a_blocking_stream_is_read_off_the_event_loop() -> None:
    """An early read completes while the stream's ``next()`` blocks (reading a sync stream
    in the loop would have stalled it until the next chunk)."""
    host, docs, _ = make_host(latency=0.05)
    chunks = Chunks("a = docs.search('alpha')\n" + "x = 1\n" * 3 + "a\n", size=25, pause=0.4)
    with SyncHost(host) as sync:
        result = sync.run_stream(chunks.blocking())
    assert result.status == "ok" and [c.lane for c in result.calls] == ["claimed"]
    (call,) = docs.calls
    assert chunks.ended is not None and call.ended < chunks.ended - 0.3


def test_a_sync_host_is_closed_after_with_and_wraps_or_makes_its_host() -> None:
    host, _, _ = make_host()
    with SyncHost(host) as sync:
        assert sync.run_source("1 + 1\n").value == 2
        assert sync.capabilities() == host.capabilities()
    with pytest.raises(RuntimeError, match="this SyncHost is closed"):
        sync.run_source("1\n")
    assert host.capabilities()  # the wrapped Host is the caller's, still usable
    with pytest.raises(TypeError, match="SyncHost\\(host\\) wraps a Host as it is"):
        SyncHost(host, isolation="rlimits")
    made = SyncHost(guest_factory=in_process_guest)
    assert isinstance(made.host, Host) and made.run_source("2\n").value == 2
    made.close()
    made.close()  # idempotent


_INTERRUPTED = """
import signal, sys, threading
signal.signal(signal.SIGINT, signal.default_int_handler)
import anyio
from pysolate import Effect, Host, SyncHost, capability
from tests.equivalence.harness import children

events = []
PROGRAM = "a = docs.search('x')\\nnotes.save(a)\\n"

class Docs:
    @capability(effect=Effect.PURE, version="1")
    async def search(self, q: str) -> str:
        events.append("search started")
        print("streaming", flush=True)
        try:
            await anyio.sleep(60)
        except BaseException:
            events.append("search cancelled")
            raise
        return q

class Notes:
    @capability(effect=Effect.WRITE)
    def save(self, text: str) -> None:
        events.append("saved")

class SlowStream:
    '''As an SDK stream: next() blocks on the network, close() ends a blocked read.'''
    def __init__(self):
        self.parts, self.closed = [PROGRAM[:21]], threading.Event()
    def __iter__(self):
        return self
    def __next__(self):
        if self.parts:
            return self.parts.pop()
        self.closed.wait(60)
        raise StopIteration
    def close(self):
        events.append("stream closed")
        self.closed.set()

async def slow_chunks():
    try:
        yield PROGRAM[:21]
        await anyio.sleep(60)
    finally:
        events.append("stream closed")

host = Host(guest_pool=0)  # (a pool would start a Guest for the next run)
host.register("docs", Docs())
host.register("notes", Notes())
def interrupted():
    print("interrupted", sorted(events), "children", children(), flush=True)

if sys.argv[1].startswith("sync"):
    with SyncHost(host) as sync:  # (checked before the with block ends: closing cancels too)
        if sys.argv[1] == "sync, SIGINT to another thread":
            sync.run_source("1\\n")  # the loop's thread is started, and takes SIGINT: the main
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})  # thread now never does
        try:
            sync.run_stream(SlowStream())
        except KeyboardInterrupt:
            interrupted()
else:
    async def main():
        await host.run_stream(slow_chunks())
    try:
        anyio.run(main)
    except KeyboardInterrupt:
        interrupted()
"""
"""A run streaming from a stalled model: an early read in flight, a write not yet reached.
Its Guest is the default isolated subprocess (started while streaming, to be killed)."""


@pytest.mark.parametrize("which", [*APIS, "sync, SIGINT to another thread"])
def test_ctrl_c_ends_a_run_as_the_async_api_does(which: str) -> None:
    """SIGINT mid-stream: the early read is cancelled, the stream closed, no write runs, the
    Guest is reaped, and ``KeyboardInterrupt`` reaches the caller: the same in both APIs,
    and when the kernel delivers the signal to another thread than the waiting one."""
    child = subprocess.Popen(
        [sys.executable, "-X", "faulthandler", "-c", _INTERRUPTED, which],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == "streaming\n"
        sent = time.monotonic()
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0, err
    assert (
        out == "interrupted ['search cancelled', 'search started', 'stream closed'] children []\n"
    )
    assert time.monotonic() - sent < 20


def test_a_sync_host_nobody_closed_stops_its_loop_when_dropped_and_at_exit() -> None:
    """No leaked loop thread: collected, its loop stops; at interpreter exit (a script that
    never closes it) the process still ends at once."""
    script = (
        "import gc, threading\n"
        "from pysolate import Host, SyncHost\n"
        "from pysolate.testing import in_process_guest\n"
        "before = threading.active_count()\n"
        "host = SyncHost(Host(guest_factory=in_process_guest))\n"
        "assert host.run_source('1 + 1').value == 2 and threading.active_count() > before\n"
        "del host\n"
        "gc.collect()\n"
        "print('dropped', threading.active_count() == before)\n"
        "left = SyncHost(guest_factory=in_process_guest)\n"
        "print('exit', left.run_source('3').value)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "dropped True\nexit 3\n"
