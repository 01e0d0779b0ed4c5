"""ToolCallCode: the program is a tool call's string argument, decoded as the deltas stream.

For each SDK's event shape (dict-shaped here; the real SDK packages in
``test_sdk_streams.py``): the selector picks exactly the first call of the named tool, the
run equals ``run_source`` on the decoded program with early calls claimed while the
argument was still streaming, and every way of not giving a program (no call, bad JSON,
missing or non-string argument, a cut reply) is a clear ``rejected``/``aborted`` result
with nothing run.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import anyio
import pytest
from sdk_shapes import CUTS, SHAPES, chat_chunk

from occurrences import Effect
from pysolate import Host
from pysolate.streams import ToolCallCode, ToolCallSelector, tool_arguments
from pysolate.testing import Script, ScriptedTool, in_process_guest, observable, scripted_tool

pytestmark = pytest.mark.anyio

PROGRAM = 'a = docs.search("alpha")\nb = docs.search("beta \u00e9 \U0001f600 \\"q\\"")\nlog.write(a + b)\n[a, b]\n'
ARGUMENTS = json.dumps({"reason": "look both up", "code": PROGRAM, "timeout": 5})


def make_host(latency: float = 0.05) -> tuple[Host, ScriptedTool, ScriptedTool]:
    docs = scripted_tool(
        search=Script(
            lambda query: [f"hit:{query}"], effect=Effect.PURE, version="1", latency=latency
        )
    )
    log = scripted_tool(write=Script(lambda items: len(items), effect=Effect.WRITE))
    host = Host(guest_factory=in_process_guest)
    host.register("docs", docs)
    host.register("log", log)
    return host, docs, log


class Timed:
    """Events with a pause after each; remembers when the last one was taken."""

    def __init__(self, events: list[object], pause: float = 0.01) -> None:
        self.events, self.pause, self.ended = events, pause, None

    async def __aiter__(self) -> AsyncIterator[object]:
        for event in self.events:
            yield event
            await anyio.sleep(self.pause)
        self.ended = anyio.current_time()


@pytest.mark.parametrize("shape", sorted(SHAPES))
async def test_selector_takes_exactly_the_first_call_of_the_tool(shape: str) -> None:
    events = SHAPES[shape]("run_code", ARGUMENTS, size=3)
    out = [chunk async for chunk in tool_arguments(Timed(events, 0.0), "run_code")]
    assert "".join(out) == ARGUMENTS
    assert len(out) > 10  # delta by delta, not at the end


@pytest.mark.parametrize("shape", sorted(SHAPES))
async def test_tool_call_stream_equals_run_source_and_claims_early(shape: str) -> None:
    events = SHAPES[shape]("run_code", ARGUMENTS, size=4)
    host, docs, log = make_host()
    stream = Timed(events)
    result = await host.run_stream(stream, code=ToolCallCode("run_code"))
    reference = await make_host()[0].run_source(json.loads(ARGUMENTS)["code"], speculate=False)
    assert result.status == "ok", result.error
    assert observable(result) == observable(reference)
    assert [c.lane for c in result.calls if c.method == "search"] == ["claimed", "claimed"]
    # The call ends with the argument; the reads started before it was complete.
    argument_done = stream.ended if stream.ended is not None else anyio.current_time()
    assert all(c.started < argument_done for c in docs.calls_to("search"))
    assert len(log.calls) == 1 and log.calls[0].started > docs.calls[0].started


@pytest.mark.parametrize("shape", sorted(SHAPES))
async def test_cut_tool_call_is_aborted_and_runs_nothing(shape: str) -> None:
    cut_at = ARGUMENTS.index("log.write")
    events = SHAPES[shape]("run_code", ARGUMENTS[:cut_at], cut=CUTS[shape])
    host, _, log = make_host()
    result = await host.run_stream(Timed(events, 0.0), code=ToolCallCode("run_code"))
    assert result.status == "aborted"
    assert result.error is not None and result.error.type == "StreamCut"
    assert CUTS[shape] in result.error.message
    assert result.calls == () and log.calls == []


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        pytest.param(
            '{"code": "x = 1\\n"', "ToolArgumentsError", "not valid JSON", id="unfinished"
        ),
        pytest.param('{"code": 42}', "ToolArgumentsError", "not a string", id="not_a_string"),
        pytest.param(
            '{"source": "x = 1"}', "ToolArgumentsError", "no 'code' argument", id="missing"
        ),
        pytest.param(
            '{"code": "log.write([1])\\n"} trailing', "ToolArgumentsError", "extra data", id="extra"
        ),
    ],
)
@pytest.mark.parametrize("shape", sorted(SHAPES))
async def test_bad_arguments_are_rejected_and_run_nothing(
    shape: str, arguments: str, error: str, message: str
) -> None:
    host, _, log = make_host()
    result = await host.run_stream(
        Timed(SHAPES[shape]("run_code", arguments), 0.0), code=ToolCallCode("run_code")
    )
    assert result.status == "rejected"
    assert (
        result.error is not None and result.error.type == error and message in result.error.message
    )
    assert result.calls == () and log.calls == []


@pytest.mark.parametrize("shape", sorted(SHAPES))
async def test_no_call_of_the_tool_is_rejected_as_no_code_block(shape: str) -> None:
    host, _, _ = make_host()
    result = await host.run_stream(
        Timed(SHAPES[shape]("other_tool", ARGUMENTS), 0.0), code=ToolCallCode("run_code")
    )
    assert result.status == "rejected"
    assert (
        result.error is not None
        and result.error.type == "NoCodeBlock"
        and "'run_code'" in result.error.message
    )


async def test_str_chunks_are_the_json_text_itself() -> None:
    host, _, _ = make_host()
    pieces = [ARGUMENTS[i : i + 7] for i in range(0, len(ARGUMENTS), 7)]
    result = await host.run_stream(pieces, code=ToolCallCode("run_code"))
    assert result.status == "ok" and result.value == [["hit:alpha"], ['hit:beta é \U0001f600 "q"']]


async def test_another_argument_name_and_syntax_error_in_the_program() -> None:
    host, _, _ = make_host()
    result = await host.run_stream(
        [json.dumps({"source": "x = (1,\n"})], code=ToolCallCode("python", argument="source")
    )
    assert (
        result.status == "rejected"
        and result.error is not None
        and result.error.type == "SyntaxError"
    )


def test_chat_selector_ends_the_call_when_the_next_call_starts() -> None:
    selector = ToolCallSelector("run_code")
    first = chat_chunk(
        {"tool_calls": [{"index": 0, "function": {"name": "run_code", "arguments": '{"co'}}]}
    )
    assert selector.feed(first, 0) == '{"co' and selector.found and not selector.ended
    nxt = chat_chunk(
        {"tool_calls": [{"index": 1, "function": {"name": "run_code", "arguments": "{}"}}]}
    )
    assert selector.feed(nxt, 1) == "" and selector.ended


def test_tool_call_code_is_checked() -> None:
    with pytest.raises(ValueError, match="non-empty str"):
        ToolCallCode("")
    with pytest.raises(ValueError, match="non-empty str"):
        ToolCallCode("run_code", argument=3)  # type: ignore[arg-type]


async def test_a_stalled_end_after_the_call_ends_the_run_at_idle_timeout_and_is_closed() -> None:
    """The rest of a tool call's reply is read to its end, but never longer than
    ``idle_timeout`` per event: a reply that stalls after the call still returns, ok."""
    state: list[str] = []

    async def stalls() -> AsyncIterator[object]:
        try:
            for event in SHAPES["anthropic"]("run_code", ARGUMENTS):
                yield event
            await anyio.sleep(30)
        finally:
            state.append("closed")

    host, _, _ = make_host()
    with anyio.fail_after(10):
        result = await host.run_stream(stalls(), code=ToolCallCode("run_code"), idle_timeout=0.3)
    assert result.status == "ok" and state == ["closed"]
