"""``pysolate.mcp``: an MCP server's tools as capabilities, against a real server written
with the official SDK (``mcp_kb_server.py``) - in process (``mcp.Client(server)``) for most
tests, and as a real stdio subprocess for the end-to-end streamed run. Every run is
compared with its sequential reference against a fresh server."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import mcp.types as mt
import pytest
from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from mcp_kb_server import make_server  # beside this file (pytest puts its directory on sys.path)

from pysolate import Effect, Host, RegistrationError, capability, propose_effect
from pysolate.integrations.mcp import result_value
from pysolate.mcp import MCP_TOOL_ERROR, register
from pysolate.testing import differences, in_process_guest

pytestmark = pytest.mark.anyio

SERVER = Path(__file__).with_name("mcp_kb_server.py")
TOOLS = ["lookup", "search", "web_search", "save_note", "fail"]  # not ``calls``: the test's own


@contextlib.asynccontextmanager
async def in_process() -> AsyncIterator[ClientSession]:
    async with Client(make_server()) as client:
        yield client.session


@contextlib.asynccontextmanager
async def over_stdio() -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable, args=[str(SERVER)], cwd=str(SERVER.parent)
    )
    with open(os.devnull, "w") as quiet:
        async with (
            stdio_client(params, errlog=quiet) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


class Chunks:
    def __init__(self, source: str, size: int = 5, pause: float = 0.01) -> None:
        self.source, self.size, self.pause = source, size, pause
        self.ended: float | None = None

    async def __aiter__(self) -> AsyncIterator[str]:
        for i in range(0, len(self.source), self.size):
            yield self.source[i : i + self.size]
            await anyio.sleep(self.pause)
        self.ended = anyio.current_time()


async def server_log(session: ClientSession) -> list[tuple[str, float]]:
    result = await session.call_tool("calls", {})
    return [(str(tool), float(at)) for tool, _, at in result.structured_content["result"]]  # type: ignore[index]


PROGRAM = """\
a = kb.lookup("intro")
docs = kb.search("q", tag="x")
w = kb.web_search("news")
kb.save_note("intro", "changed")
b = kb.lookup("intro")
try:
    kb.fail(3)
except Exception as e:
    print(type(e).__name__, e.type_name)
[a, [d["title"] for d in docs], w, b]
"""

CONFIRM = {"kb.lookup": Effect.IMMUTABLE_READ, "kb.search": Effect.PURE}


# -- end to end --------------------------------------------------------------------------------


async def test_a_streamed_program_against_a_real_stdio_server_equals_the_reference() -> None:
    async with over_stdio() as session:
        host = Host()  # the isolated subprocess Guest, as in production
        await register(host, session, capability="kb", confirm=CONFIRM, tools=TOOLS)
        stream = Chunks(PROGRAM)
        streamed = await host.run_stream(stream)
        log = await server_log(session)
    async with over_stdio() as session:
        ref_host = Host()
        await register(ref_host, session, capability="kb", confirm=CONFIRM, tools=TOOLS)
        reference = await ref_host.run_source(PROGRAM, speculate=False)
    assert differences(streamed, reference) == []
    assert streamed.status == "ok", streamed.error
    assert streamed.value == ["hello", ["q-x-0", "q-x-1"], "web results for news", "changed"]
    assert streamed.stdout == f"ToolError {MCP_TOOL_ERROR}\n"
    assert [(c.tool, c.lane) for c in streamed.calls] == [
        ("kb.lookup", "claimed"),
        ("kb.search", "claimed"),
        ("kb.web_search", "direct"),
        ("kb.save_note", "direct"),
        (
            "kb.lookup",
            "claimed",
        ),  # after the write: re-speculated on the write's new view, never the pre-write result
        ("kb.fail", "direct"),  # unconfirmed closed-world proposal: never early
    ]
    assert stream.ended is not None
    early = {tool for tool, at in log if at < stream.ended}
    assert early == {"lookup", "search"}, log


async def test_top_level_function_tools_from_a_session() -> None:
    source = PROGRAM.replace("kb.", "")
    confirm = ["lookup", "search"]  # confirm the proposals as they are
    async with in_process() as session:
        host = Host(guest_factory=in_process_guest)
        registered = await register(host, session, confirm=confirm, tools=TOOLS)
        streamed = await host.run_stream(Chunks(source))
    async with in_process() as session:
        ref_host = Host(guest_factory=in_process_guest)
        await register(ref_host, session, confirm=confirm, tools=TOOLS)
        reference = await ref_host.run_source(source, speculate=False)
    assert differences(streamed, reference) == []
    assert [c.lane for c in streamed.calls][:2] == ["claimed", "claimed"]
    assert {r.name: (r.effect, r.confirmed) for r in registered} == {
        "lookup": (Effect.IMMUTABLE_READ, True),
        "search": (Effect.IMMUTABLE_READ, True),
        "web_search": (Effect.LIVE_READ, False),
        "save_note": (Effect.WRITE, False),
        "fail": (Effect.LIVE_READ, False),
    }
    assert sorted(host.capabilities()[""]) == sorted(TOOLS)


async def test_arguments_bind_exactly_to_the_input_schema() -> None:
    async with in_process() as session:
        host = Host(guest_factory=in_process_guest)
        await register(host, session, capability="kb", confirm=CONFIRM, tools=TOOLS)
        source = (
            'x = kb.search("q")\ny = kb.search(query="q", limit=2)\n'
            'try:\n    kb.search("q", nope=1)\nexcept TypeError as e:\n    print("TypeError")\n[x == y]\n'
        )
        result = await host.run_stream(Chunks(source))
    assert result.value == [True] and result.stdout == "TypeError\n"
    assert result.calls[0].key == result.calls[1].key  # defaults applied: one call
    assert [c.lane for c in result.calls[:2]] == ["claimed", "claimed"]


# -- registration ------------------------------------------------------------------------------


async def test_confirm_and_tools_must_name_listed_tools_and_nothing_is_registered_on_error() -> (
    None
):
    async with in_process() as session:
        host = Host()
        with pytest.raises(RegistrationError, match="confirm= names no registered tool"):
            await register(
                host, session, capability="kb", confirm={"kb.nope": Effect.PURE}, tools=TOOLS
            )
        with pytest.raises(RegistrationError, match="tools= names no tool"):
            await register(host, session, tools=["nope"])
        with pytest.raises(RegistrationError, match="must be an Effect"):
            await register(host, session, confirm={"lookup": "pure"}, tools=TOOLS)  # type: ignore[dict-item]
        with pytest.raises(RegistrationError, match="confirm"):
            await register(host, session, confirm={"lookup": propose_effect(None)}, tools=TOOLS)  # type: ignore[dict-item]

        @capability(effect=Effect.PURE)
        def search(q: str) -> str:
            return q

        host.register("search", search)
        with pytest.raises(RegistrationError, match="already registered"):
            await register(host, session, tools=TOOLS)
        assert host.capabilities() == {"": ["search"]}  # nothing of the failed call stayed


async def test_rename_for_names_that_are_not_identifiers() -> None:
    async with in_process() as session:
        host = Host(guest_factory=in_process_guest)
        await register(host, session, tools=["lookup"], rename={"lookup": "get_note"})
        result = await host.run_source('get_note("faq")\n', speculate=False)
        assert result.value == "read the docs"
        with pytest.raises(RegistrationError, match="not an identifier"):
            await register(Host(), session, tools=["lookup"], rename={"lookup": "get-note"})


# -- units: schema, results, annotations ------------------------------------------------------


def _tool(schema: dict[str, object], **extra: object) -> mt.Tool:
    return mt.Tool(name="t", input_schema=schema, **extra)  # type: ignore[arg-type]


def test_the_signature_keeps_property_order_when_required_ones_come_first() -> None:
    from pysolate.integrations.mcp import _signature

    sig, omit = _signature(
        _tool(
            {
                "type": "object",
                "properties": {"q": {}, "n": {"default": 3}, "t": {}},
                "required": ["q"],
            }
        )
    )
    assert str(sig) == "(q, n=3, t=None)" and omit == {"t"}
    sig, _ = _signature(
        _tool({"type": "object", "properties": {"n": {"default": 3}, "q": {}}, "required": ["q"]})
    )
    assert str(sig) == "(q, *, n=3)"  # a required one after an optional one: optional ones by name
    sig, _ = _signature(_tool({"type": "object"}))
    assert str(sig) == "()"


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"type": "array"}, "not an object schema"),
        ({"type": "object", "properties": {"max-results": {}}}, "cannot be a Python parameter"),
        ({"type": "object", "properties": {"from": {}}}, "cannot be a Python parameter"),
        ({"type": "object", "properties": {}, "required": ["q"]}, "does not define"),
    ],
)
def test_schemas_that_cannot_be_a_signature_are_refused(
    schema: dict[str, object], message: str
) -> None:
    from pysolate.integrations.mcp import _signature

    with pytest.raises(RegistrationError, match=message):
        _signature(_tool(schema))


def test_results_become_plain_values() -> None:
    text = mt.TextContent(type="text", text="hi")
    assert result_value(mt.CallToolResult(content=[text], structured_content={"a": [1]})) == {
        "a": [1]
    }
    assert (
        result_value(mt.CallToolResult(content=[], structured_content={"result": 5}), unwrap=True)
        == 5
    )
    assert result_value(mt.CallToolResult(content=[], structured_content={"result": 5})) == {
        "result": 5
    }
    assert result_value(mt.CallToolResult(content=[text])) == "hi"
    assert result_value(mt.CallToolResult(content=[text, text])) == ["hi", "hi"]
    assert result_value(mt.CallToolResult(content=[])) is None
    image = mt.ImageContent(type="image", data="AAAA", mime_type="image/png")
    assert result_value(mt.CallToolResult(content=[image])) == {
        "type": "image",
        "data": "AAAA",
        "mimeType": "image/png",
    }
    from pysolate import ToolFailure

    with pytest.raises(ToolFailure) as failed:
        result_value(mt.CallToolResult(content=[text], is_error=True))
    assert (failed.value.type_name, failed.value.message) == (MCP_TOOL_ERROR, "hi")


@pytest.mark.parametrize(
    ("annotations", "effect"),
    [
        (mt.ToolAnnotations(read_only_hint=True, open_world_hint=False), Effect.IMMUTABLE_READ),
        (mt.ToolAnnotations(read_only_hint=True), Effect.LIVE_READ),
        (mt.ToolAnnotations(destructive_hint=False), Effect.WRITE),
        (mt.ToolAnnotations(title="only a title"), Effect.UNKNOWN),
        ({"read_only_hint": True, "open_world_hint": False}, Effect.IMMUTABLE_READ),
        ({"readOnlyHint": True, "openWorldHint": False}, Effect.IMMUTABLE_READ),
    ],
)
def test_propose_effect_accepts_the_sdks_annotations(annotations: object, effect: Effect) -> None:
    assert propose_effect(annotations).effect is effect
