"""Calls in statements still streaming, end to end: they start before their statement is
complete, the Guest claims them by exact key, and the result equals the sequential one.

The stream pauses after each line; a read counts as started early when it started before
the stream delivered the line that completes its statement (an order of events, not a
duration).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from pysolate import Effect, Host, LanePolicy, RunResult
from pysolate.testing import Script, ScriptedTool, differences, in_process_guest, scripted_tool

pytestmark = pytest.mark.anyio


def make_host() -> tuple[Host, ScriptedTool]:
    kb = {"mode": "fast", "owner:billing": "dana"}

    def get(key: str) -> str:
        if key not in kb:
            raise KeyError(key)
        return kb[key]

    docs = scripted_tool(
        search=Script(
            lambda query: [f"hit:{query}"], effect=Effect.PURE, version="1", latency=0.05
        ),
        get=Script(get, effect=Effect.IMMUTABLE_READ, version="1", latency=0.05),
    )
    host = Host(guest_factory=in_process_guest)
    host.register("docs", docs)
    return host, docs


class Lines:
    """The source one line per chunk, with a pause after each; records when each was sent."""

    def __init__(self, source: str) -> None:
        self.lines = source.splitlines(keepends=True)
        self.sent: list[float] = []

    async def __aiter__(self) -> AsyncIterator[str]:
        for line in self.lines:
            self.sent.append(anyio.current_time())
            yield line
            await anyio.sleep(0.05)


async def both(
    source: str, policy: LanePolicy | None = None
) -> tuple[RunResult, ScriptedTool, Lines]:
    host, docs = make_host()
    stream = Lines(source)
    result = await host.run_stream(stream, policy=policy)
    reference = await make_host()[0].run_source(source, speculate=False)
    assert differences(reference, result) == []
    return result, docs, stream


async def test_a_read_in_an_if_body_starts_before_the_if_is_complete() -> None:
    source = (
        'mode = "fast"\n'
        'if mode == "fast":\n'
        '    plan = docs.search(query="fast path")\n'
        "    n = 1\n"
        "else:\n"
        '    plan = docs.search(query="safe path")\n'
        "plan\n"
    )
    result, docs, stream = await both(source)
    assert result.value == ["hit:fast path"]
    (search,) = docs.calls_to("search")
    assert search.started < stream.sent[6], "before the line that completes the if"
    assert [c.lane for c in result.calls] == ["claimed"]


async def test_a_multiline_tuple_of_reads_starts_element_by_element() -> None:
    source = (
        "pages = (\n"
        '    docs.search(query="a"),\n'
        '    docs.search(query="b"),\n'
        '    docs.get(key="mode"),\n'
        ")\n"
        "pages\n"
    )
    result, docs, stream = await both(source)
    assert result.value == (["hit:a"], ["hit:b"], "fast")
    first = docs.calls_to("search")[0]
    assert first.started < stream.sent[2], "started when its own line streamed"
    assert all(c.lane == "claimed" for c in result.calls)
    assert result.report.physical == 3


async def test_a_failing_read_in_a_try_body_surfaces_where_the_program_reaches_it() -> None:
    source = (
        "try:\n"
        '    owner = docs.get(key="owner:sales")\n'
        "except KeyError:\n"
        '    owner = "unassigned"\n'
        "owner\n"
    )
    result, docs, stream = await both(source)
    assert result.value == "unassigned"
    (get,) = docs.calls_to("get")
    assert get.started < stream.sent[2]
    assert [(c.lane, c.outcome) for c in result.calls] == [("claimed", "error")]


async def test_an_element_that_becomes_conditional_is_wasted_not_wrong() -> None:
    """The trailing ``if`` makes the tuple conditional after its elements streamed: the
    early read is orphaned (the program never makes it), the result is the sequential one."""
    source = 'flag = False\npages = (\n    docs.search(query="a"),\n) if flag else ()\npages\n'
    result, docs, _ = await both(source)
    assert result.value == ()
    assert len(docs.calls_to("search")) == 1
    assert result.calls == () and result.report.orphaned + result.report.cancelled == 1


async def test_provisional_speculation_can_be_turned_off() -> None:
    source = 'if True:\n    plan = docs.search(query="x")\n    n = 1\nplan\n'
    result, docs, stream = await both(source, LanePolicy(provisional=False))
    (search,) = docs.calls_to("search")
    assert search.started >= stream.sent[3], "waited for the statement"
    assert result.value == ["hit:x"]
