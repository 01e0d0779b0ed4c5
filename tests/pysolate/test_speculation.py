"""Speculation end to end, through the isolated subprocess Guest.

Every test streams a program into ``run_stream`` and checks two things: what speculation
did (claims, dispositions, when tools were called) and that the result equals the
sequential reference ``run_source(sealed, speculate=False)`` on an identical fresh Host.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from dataclasses import dataclass

import anyio
import pytest

from pysolate import Effect, Host, LanePolicy, RunResult
from pysolate._guest import _forked
from pysolate.testing import Script, memory_workspace, scripted_tool

pytestmark = pytest.mark.anyio

FILES = {"a.txt": "alpha\n", "b.txt": "beta\n", "notes/x.md": "x-ray\n", "notes/y.md": "yankee\n"}


@dataclass
class Stream:
    """A source streamed in fixed chunks; remembers when it ended (the earliest seal)."""

    source: str
    size: int = 6
    delay: float = 0.005
    ended_at: float | None = None
    fail_after: int | None = None

    async def __aiter__(self) -> AsyncIterator[str]:
        try:
            for n, i in enumerate(range(0, len(self.source), self.size)):
                if self.fail_after is not None and n == self.fail_after:
                    raise ConnectionError("model stream dropped")
                await anyio.sleep(self.delay)
                yield self.source[i : i + self.size]
        finally:
            self.ended_at = anyio.current_time()


@dataclass
class Tools:
    docs: object
    clock: object
    store: object


def make_host(latency: float = 0.1) -> tuple[Host, Tools]:
    docs = scripted_tool(
        search=Script(
            lambda query: [f"hit:{query}"], effect=Effect.PURE, version="1", latency=latency
        ),
        fail=Script(_raise_lookup, effect=Effect.PURE, version="1", latency=latency),
    )
    clock = scripted_tool(now=Script(lambda: 42, effect=Effect.LIVE_READ, latency=0.01))
    store = scripted_tool(
        put=Script(lambda key, value: None, effect=Effect.WRITE, latency=0.01),
        poke=Script(lambda: "poked", latency=0.01),  # effect UNKNOWN (the default)
    )
    host = Host()
    host.register("docs", docs)
    host.register("clock", clock)
    host.register("store", store)
    host.register("workspace", memory_workspace(FILES))
    return host, Tools(docs, clock, store)


def _raise_lookup(key: str) -> str:
    raise LookupError(f"no entry {key}")


def call_log(result: RunResult) -> list[tuple[object, ...]]:
    return [
        (
            c.capability,
            c.method,
            c.args,
            c.kwargs,
            c.outcome,
            c.result,
            c.error and (c.error.type, c.error.message),
        )
        for c in result.calls
    ]


def workspace_state(result: RunResult) -> object:
    ws = result.workspaces.get("workspace")
    return None if ws is None else ws.state_files()


def assert_equivalent(streamed: RunResult, reference: RunResult) -> None:
    assert streamed.status == reference.status
    assert streamed.value == reference.value
    assert streamed.stdout == reference.stdout
    assert streamed.error == reference.error
    assert call_log(streamed) == call_log(reference)
    assert workspace_state(streamed) == workspace_state(reference)


async def run_both(
    source: str,
    *,
    latency: float = 0.1,
    policy: LanePolicy | None = None,
    stream: Stream | None = None,
) -> tuple[RunResult, RunResult, Tools, Stream]:
    """Stream ``source`` through Pysolate, then run it sequentially on a fresh twin Host."""
    host, tools = make_host(latency)
    stream = stream or Stream(source)
    streamed = await host.run_stream(stream, policy=policy)
    twin, _ = make_host(latency)
    reference = await twin.run_source(source, speculate=False)
    return streamed, reference, tools, stream


def child_processes() -> list[int]:
    """Live (non-zombie) Guest processes of this test process, from /proc: its children, and
    the fork servers' (the servers' own processes are long-lived by design and not Guests)."""
    servers = {pid for server in _forked.servers.values() for pid in server.pids()}
    me, children = os.getpid(), []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) in {me, *servers} and fields[0] != "Z" and int(entry) not in servers:
                children.append(int(entry))
    return children


async def guests_left(host: Host) -> list[int]:
    """``child_processes`` but the one ready Guest the Host's pool keeps for its next run
    (started after this run took its own; a refill under way is awaited, bounded)."""
    pool = host.guest_pool()
    if pool is None:
        return child_processes()
    with anyio.fail_after(20):
        while any(loop_pool.starting is not None for loop_pool in pool._loops.values()):
            await anyio.sleep(0.005)
    ready = {guest.pid for guest in pool.guests()}
    return [pid for pid in child_processes() if pid not in ready]


def lanes(result: RunResult, method: str) -> list[str]:
    return [c.lane for c in result.calls if c.method == method]


def started_before(tool: object, method: str, moment: float) -> list[float]:
    return [c.started for c in tool.calls_to(method) if c.started < moment]  # type: ignore[attr-defined]


async def test_independent_reads_are_claimed() -> None:
    src = "a = docs.search('a')\nb = docs.search('b')\nc = docs.search('c')\n[a, b, c]\n"
    streamed, reference, tools, stream = await run_both(src)
    assert_equivalent(streamed, reference)
    assert lanes(streamed, "search") == ["claimed"] * 3
    assert streamed.report.physical == 3 and streamed.report.orphaned == 0
    assert stream.ended_at is not None
    assert len(started_before(tools.docs, "search", stream.ended_at)) == 3, (
        "all three ran while streaming"
    )


async def test_argument_from_an_earlier_result_is_claimed() -> None:
    src = "hits = docs.search('topic')\nmore = docs.search(hits[0].upper() + '!')\nmore\n"
    streamed, reference, _, _ = await run_both(src)
    assert_equivalent(streamed, reference)
    assert lanes(streamed, "search") == ["claimed", "claimed"]


async def test_loop_over_a_listed_directory_is_claimed() -> None:
    src = (
        "names = workspace.list_dir('notes')\n"
        "texts = []\n"
        "for name in names:\n"
        "    texts.append(workspace.read_text('notes/' + name))\n"
        "texts\n"
    )
    streamed, reference, _, _ = await run_both(src)
    assert_equivalent(streamed, reference)
    assert lanes(streamed, "list_dir") == ["claimed"]
    assert lanes(streamed, "read_text") == ["claimed", "claimed"]


async def test_comprehension_over_a_listed_directory_is_claimed() -> None:
    src = "names = workspace.list_dir('notes')\nfound = [docs.search(n) for n in names]\nfound\n"
    streamed, reference, _, _ = await run_both(src)
    assert_equivalent(streamed, reference)
    assert lanes(streamed, "search") == ["claimed", "claimed"]


async def test_comprehension_after_a_loop_that_appends_is_claimed() -> None:
    src = (
        "names = workspace.list_dir('notes')\n"
        "texts = []\n"
        "for name in names:\n"
        "    texts.append(workspace.read_text('notes/' + name))\n"
        "found = [docs.search(n) for n in names]\n"
        "texts, found\n"
    )
    streamed, reference, _, _ = await run_both(src)
    assert_equivalent(streamed, reference)
    assert lanes(streamed, "search") == ["claimed", "claimed"]


async def test_read_after_write_never_claims_the_pre_write_value() -> None:
    src = (
        "before = workspace.read_text('a.txt')\n"
        "workspace.write_text('a.txt', 'rewritten')\n"
        "after = workspace.read_text('a.txt')\n"
        "other = workspace.read_text('b.txt')\n"
        "before, after, other\n"
    )
    streamed, reference, _, _ = await run_both(src)
    assert_equivalent(streamed, reference)
    assert streamed.value == ("alpha\n", "rewritten", "beta\n")
    reads = [c for c in streamed.calls if c.method == "read_text"]
    assert reads[0].lane == "claimed"
    # The read after the write takes only work started on the view the write left: the
    # write ran early on a layer of the branch, the read on that layer once it was written.
    observations = {o.id: o for o in streamed.observations}
    (write,) = [c for c in streamed.calls if c.method == "write_text"]
    assert write.lane == "claimed" and write.observation_id is not None
    early_write = observations[write.observation_id]
    assert reads[1].lane == "claimed" and reads[1].observation_id is not None
    after = observations[reads[1].observation_id]
    assert after.layer == early_write.layer == 1 and early_write.ended is not None
    assert after.started is not None and after.started >= early_write.ended
    assert after.key != observations[reads[0].observation_id].key  # type: ignore[index]


async def test_failing_early_read_raises_at_its_line_and_try_catches_it() -> None:
    src = (
        "try:\n    docs.fail('k')\nexcept LookupError as e:\n    caught = str(e)\ndocs.fail('z')\n"
    )
    streamed, reference, _, _ = await run_both(src)
    assert_equivalent(streamed, reference)
    assert streamed.status == "error"
    assert streamed.error is not None and (streamed.error.type, streamed.error.line) == (
        "LookupError",
        5,
    )
    assert lanes(streamed, "fail") == ["claimed", "claimed"], (
        "both failures were held, then raised in place"
    )


async def test_speculated_calls_the_program_never_reaches_are_orphaned_or_cancelled() -> None:
    src = "x = docs.search('first')\nraise SystemExit('stop here') if x else None\ndocs.search('never')\n"
    streamed, reference, _, _ = await run_both(src)
    assert_equivalent(streamed, reference)
    unclaimed = [o for o in streamed.observations if o.lane == "speculative" and o.claims == 0]
    assert [o.disposition for o in unclaimed] in (["orphaned"], ["cancelled"])
    assert streamed.report.orphaned + streamed.report.cancelled == 1


async def test_live_reads_writes_and_unknown_calls_never_run_before_seal() -> None:
    src = (
        "t = clock.now()\n"
        "store.put('k', t)\n"
        "store.poke()\n"
        "late = docs.search('after live read')\n"
        "t, late\n"
    )
    streamed, reference, tools, stream = await run_both(src)
    assert_equivalent(streamed, reference)
    assert stream.ended_at is not None
    for tool, method in ((tools.clock, "now"), (tools.store, "put"), (tools.store, "poke")):
        assert started_before(tool, method, stream.ended_at) == [], f"{method} ran before seal"
        assert [c.lane for c in streamed.calls if c.method == method] == ["direct"]
    assert lanes(streamed, "search") == ["claimed"], "a read after a live read is still speculated"


@pytest.mark.parametrize(
    "tail",
    ["if t:\n", "x = (", "def f(:\n"],
    ids=["unterminated-block", "open-bracket", "syntax-error"],
)
async def test_a_stream_ending_in_a_syntax_error_runs_no_effect(tail: str) -> None:
    src = "t = clock.now()\nstore.put('k', 1)\nhits = docs.search('q')\n" + tail
    host, tools = make_host(0.05)
    result = await host.run_stream(Stream(src))
    assert await guests_left(host) == [], "the Guest started during the stream is gone"
    assert result.status == "rejected"
    assert result.error is not None and result.error.type in ("SyntaxError", "IndentationError")
    assert result.calls == ()
    assert tools.clock.calls == [] and tools.store.calls == []  # type: ignore[attr-defined]
    early = [o for o in result.observations if o.lane == "speculative"]
    assert {o.disposition for o in early} <= {"cancelled", "orphaned"}
    reference = await make_host(0.05)[0].run_source(src, speculate=False)
    assert (reference.status, reference.error) == (result.status, result.error)


async def test_a_cut_stream_is_aborted_and_runs_no_effect() -> None:
    src = "t = clock.now()\nstore.put('k', 1)\nhits = docs.search('q')\nmore = docs.search('r')\n"
    host, tools = make_host(0.05)
    result = await host.run_stream(Stream(src, fail_after=9))
    assert result.status == "aborted"
    assert result.error is not None and result.error.type == "ConnectionError"
    assert result.calls == ()
    assert tools.clock.calls == [] and tools.store.calls == []  # type: ignore[attr-defined]


async def test_mutating_a_result_does_not_change_another_claim() -> None:
    src = (
        "first = docs.search('same')\n"
        "first.append('mutated')\n"
        "second = docs.search('same')\n"
        "first, second\n"
    )
    streamed, reference, tools, _ = await run_both(src)
    assert_equivalent(streamed, reference)
    assert streamed.value == (["hit:same", "mutated"], ["hit:same"])
    assert len(tools.docs.calls_to("search")) == 1, "equal keys shared one physical observation"  # type: ignore[attr-defined]
    assert streamed.report.shared == 1


async def test_budget_caps_early_work_and_the_rest_runs_direct() -> None:
    src = "".join(f"r{i} = docs.search('{i}')\n" for i in range(5)) + "[r0, r4]\n"
    streamed, reference, _, _ = await run_both(src, policy=LanePolicy(budget=2))
    assert_equivalent(streamed, reference)
    assert lanes(streamed, "search") == ["claimed", "claimed", "direct", "direct", "direct"]


async def test_markdown_reply_runs_its_python_block() -> None:
    src = "a = docs.search('md')\na\n"
    reply = f"Here is the plan.\n\n```python\n{src}```\n\nDone.\n"
    host, _ = make_host(0.05)
    streamed = await host.run_stream(Stream(reply), code="markdown")
    reference = await make_host(0.05)[0].run_source(src, speculate=False)
    assert_equivalent(streamed, reference)
    assert lanes(streamed, "search") == ["claimed"]


async def test_caller_cancellation_leaves_no_task_or_effect() -> None:
    src = "hits = docs.search('q')\nstore.put('k', 1)\n" + "x = 1\n" * 50
    host, tools = make_host(5.0)
    with anyio.move_on_after(0.2):
        await host.run_stream(Stream(src, delay=0.05))
    assert await guests_left(host) == []
    assert tools.store.calls == []  # type: ignore[attr-defined]
    searches = tools.docs.calls_to("search")  # type: ignore[attr-defined]
    assert [c.outcome for c in searches] in ([], ["cancelled"])
