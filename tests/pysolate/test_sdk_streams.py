"""The real ``openai`` and ``anthropic`` SDKs, driven against a local fake (``MockTransport``
serving SSE as the APIs do, with pauses between events): never the network.

End to end, for each of the six ways to stream (chat ``create(stream=True)`` and
``chat.completions.stream()``, Responses ``create(stream=True)`` and ``responses.stream()``,
Messages ``create(stream=True)`` and ``messages.stream()``): a reply whose program is the
``code`` argument of a ``run_code`` tool call runs through ``run_stream(...,
code=ToolCallCode("run_code"))`` equal to ``run_source`` on the decoded program, with the
early reads claimed and started while the argument was still streaming. A reply the SDK
reports cut (token limit) is ``aborted`` and runs nothing, in text and tool-call mode; the
SDK objects one must not pass (an un-entered stream manager, an un-awaited coroutine) are a
``TypeError`` naming ``async with`` / ``await``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import anthropic
import anyio
import httpx2 as httpx  # the HTTP client both SDKs are built on
import openai
import pytest

from occurrences import Effect
from pysolate import Host
from pysolate.streams import ToolCallCode
from pysolate.testing import Script, ScriptedTool, in_process_guest, observable, scripted_tool

pytestmark = pytest.mark.anyio

PROGRAM = 'a = docs.search("alpha")\nb = docs.search("beta \\u00e9")\nnotes.save(a + b)\n[a, b]\n'
ARGUMENTS = json.dumps({"reason": "both", "code": PROGRAM})
PAUSE = 0.01
"""Seconds between two SSE events: the model 'typing'."""


def pieces(text: str, size: int = 6) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


# -- the APIs' SSE, event by event -------------------------------------------------------


def chat_events(
    *, tool: str | None, text: str = "", finish: str = "tool_calls"
) -> list[tuple[str | None, dict[str, Any]]]:
    def chunk(
        delta: dict[str, Any], finish_reason: str | None = None
    ) -> tuple[None, dict[str, Any]]:
        return None, {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "gpt-test",
            "choices": [
                {"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}
            ],
        }

    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": t}) for t in pieces(text)]
    if tool is not None:
        first = {
            "index": 0,
            "id": "call_1",
            "type": "function",
            "function": {"name": tool, "arguments": ""},
        }
        events.append(chunk({"tool_calls": [first]}))
        events += [
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": p}}]})
            for p in pieces(ARGUMENTS)
        ]
    events.append(chunk({}, finish))
    return events


def responses_events(
    *, tool: str, arguments: str = ARGUMENTS, cut: bool = False
) -> list[tuple[str | None, dict[str, Any]]]:
    response = {
        "id": "resp_1", "object": "response", "created_at": 1, "model": "gpt-test", "status": "in_progress",
        "output": [], "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
    }  # fmt: skip
    item = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": tool,
        "arguments": "",
        "status": "in_progress",
    }
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": response},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
    ]
    events += [
        {
            "type": "response.function_call_arguments.delta",
            "output_index": 0,
            "item_id": "fc_1",
            "delta": p,
        }
        for p in pieces(arguments)
    ]
    if cut:
        done = {
            **response,
            "status": "incomplete",
            "incomplete_details": {"reason": "max_output_tokens"},
        }
        events.append({"type": "response.incomplete", "response": done})
    else:
        final = {**item, "arguments": arguments, "status": "completed"}
        events.append(
            {
                "type": "response.function_call_arguments.done",
                "output_index": 0,
                "item_id": "fc_1",
                "arguments": arguments,
            }
        )
        events.append({"type": "response.output_item.done", "output_index": 0, "item": final})
        events.append(
            {
                "type": "response.completed",
                "response": {**response, "status": "completed", "output": [final]},
            }
        )
    return [(e["type"], {**e, "sequence_number": n}) for n, e in enumerate(events)]


def anthropic_events(
    *, tool: str | None, text: str = "", stop: str = "tool_use", arguments: str = ARGUMENTS
) -> list[tuple[str | None, dict[str, Any]]]:
    message = {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test", "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 5, "output_tokens": 1},
    }  # fmt: skip
    events: list[dict[str, Any]] = [{"type": "message_start", "message": message}]
    if text:
        events.append(
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            }
        )
        events += [
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}}
            for t in pieces(text)
        ]
        events.append({"type": "content_block_stop", "index": 0})
    if tool is not None:
        at = 1 if text else 0  # blocks are numbered in order
        block = {"type": "tool_use", "id": "toolu_1", "name": tool, "input": {}}
        events.append({"type": "content_block_start", "index": at, "content_block": block})
        events.append({"type": "ping"})
        events += [
            {
                "type": "content_block_delta",
                "index": at,
                "delta": {"type": "input_json_delta", "partial_json": p},
            }
            for p in pieces(arguments)
        ]
        events.append({"type": "content_block_stop", "index": at})
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": 40},
        }
    )
    events.append({"type": "message_stop"})
    return [(e["type"], e) for e in events]


def last_argument_delta(events: list[tuple[str | None, dict[str, Any]]]) -> int:
    """The index of the last event carrying a piece of a tool call's arguments (in every
    shape the next event ends the call)."""

    def carries(data: dict[str, Any]) -> bool:
        calls = (data.get("choices") or [{}])[0].get("delta", {}).get("tool_calls") or []
        return (
            any(c.get("function", {}).get("arguments") for c in calls)
            or data.get("type") == "response.function_call_arguments.delta"
            or data.get("delta", {}).get("type") == "input_json_delta"
        )

    return max(i for i, (_, data) in enumerate(events) if carries(data))


class SSE(httpx.AsyncByteStream):
    """The body of a streaming response, one SSE event per ``PAUSE``; ``sent`` keeps when
    each event left, ``closed`` whether the client closed the response. ``tail`` seconds
    pass before each event after the first ``tail_after``, and before ``[DONE]`` (a slow end
    of the reply)."""

    def __init__(
        self,
        events: list[tuple[str | None, dict[str, Any]]],
        done_marker: bool,
        *,
        tail: float = 0.0,
        tail_after: int = 0,
    ) -> None:
        self.events, self.done_marker = events, done_marker
        self.tail, self.tail_after = tail, tail_after
        self.sent: list[float] = []
        self.closed = False
        self.started = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self.started:
            return  # a body is sent once (the SDK drains it again after [DONE])
        self.started = True
        for n, (name, data) in enumerate(self.events):
            if self.tail and n >= self.tail_after:
                await anyio.sleep(self.tail)
            head = f"event: {name}\n" if name else ""
            self.sent.append(anyio.current_time())
            yield f"{head}data: {json.dumps(data)}\n\n".encode()
            await anyio.sleep(PAUSE)
        if self.done_marker:
            await anyio.sleep(self.tail)
            yield b"data: [DONE]\n\n"

    async def aclose(self) -> None:
        self.closed = True


class FakeAPI:
    """A MockTransport handler answering every POST with the next queued SSE body."""

    def __init__(self) -> None:
        self.bodies: list[SSE] = []
        self.requests: list[dict[str, Any]] = []

    def serve(
        self,
        events: list[tuple[str | None, dict[str, Any]]],
        *,
        done_marker: bool = False,
        **slow_end: Any,
    ) -> SSE:
        body = SSE(events, done_marker, **slow_end)
        self.bodies.append(body)
        return body

    async def __call__(self, request: Any) -> Any:
        self.requests.append(json.loads(request.content or b"{}"))
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, stream=self.bodies.pop(0)
        )


def openai_client(api: FakeAPI) -> Any:
    http = httpx.AsyncClient(transport=httpx.MockTransport(api))
    return openai.AsyncOpenAI(
        api_key="test", base_url="http://fake.test/v1", http_client=http, max_retries=0
    )


def anthropic_client(api: FakeAPI) -> Any:
    http = httpx.AsyncClient(transport=httpx.MockTransport(api))
    return anthropic.AsyncAnthropic(
        api_key="test", base_url="http://fake.test", http_client=http, max_retries=0
    )


TOOLS_OPENAI = [
    {"type": "function", "function": {"name": "run_code", "parameters": {"type": "object"}}}
]
TOOLS_RESPONSES = [{"type": "function", "name": "run_code", "parameters": {"type": "object"}}]
TOOLS_ANTHROPIC = [{"name": "run_code", "input_schema": {"type": "object"}}]
CHAT = {"model": "gpt-test", "messages": [{"role": "user", "content": "go"}]}
MESSAGES = {
    "model": "claude-test",
    "max_tokens": 500,
    "messages": [{"role": "user", "content": "go"}],
}


def make_host() -> tuple[Host, ScriptedTool, ScriptedTool]:
    docs = scripted_tool(
        search=Script(lambda q: [f"hit:{q}"], effect=Effect.PURE, version="1", latency=0.02)
    )
    notes = scripted_tool(save=Script(lambda items: len(items), effect=Effect.WRITE))
    host = Host(guest_factory=in_process_guest)
    host.register("docs", docs)
    host.register("notes", notes)
    return host, docs, notes


Run = Callable[[Any, Host, object], Any]


async def chat_create(api: FakeAPI, host: Host, code: object) -> Any:
    stream = await openai_client(api).chat.completions.create(
        **CHAT, tools=TOOLS_OPENAI, stream=True
    )
    return await host.run_stream(stream, code=code)  # type: ignore[arg-type]


async def chat_helper(api: FakeAPI, host: Host, code: object) -> Any:
    async with openai_client(api).chat.completions.stream(**CHAT, tools=TOOLS_OPENAI) as stream:
        return await host.run_stream(stream, code=code)  # type: ignore[arg-type]


async def responses_create(api: FakeAPI, host: Host, code: object) -> Any:
    stream = await openai_client(api).responses.create(
        model="gpt-test", input="go", tools=TOOLS_RESPONSES, stream=True
    )
    return await host.run_stream(stream, code=code)  # type: ignore[arg-type]


async def responses_helper(api: FakeAPI, host: Host, code: object) -> Any:
    async with openai_client(api).responses.stream(
        model="gpt-test", input="go", tools=TOOLS_RESPONSES
    ) as stream:
        return await host.run_stream(stream, code=code)  # type: ignore[arg-type]


async def messages_create(api: FakeAPI, host: Host, code: object) -> Any:
    stream = await anthropic_client(api).messages.create(
        **MESSAGES, tools=TOOLS_ANTHROPIC, stream=True
    )
    return await host.run_stream(stream, code=code)  # type: ignore[arg-type]


async def messages_helper(api: FakeAPI, host: Host, code: object) -> Any:
    async with anthropic_client(api).messages.stream(**MESSAGES, tools=TOOLS_ANTHROPIC) as stream:
        return await host.run_stream(stream, code=code)  # type: ignore[arg-type]


WAYS: dict[str, tuple[Run, Callable[..., list[tuple[str | None, dict[str, Any]]]], bool]] = {
    "chat_create": (chat_create, chat_events, True),
    "chat_helper": (chat_helper, chat_events, True),
    "responses_create": (responses_create, responses_events, False),
    "responses_helper": (responses_helper, responses_events, False),
    "messages_create": (messages_create, anthropic_events, False),
    "messages_helper": (messages_helper, anthropic_events, False),
}


@pytest.mark.parametrize("way", sorted(WAYS))
async def test_a_tool_call_from_the_real_sdk_equals_run_source_and_claims_early(way: str) -> None:
    run, events, done_marker = WAYS[way]
    api = FakeAPI()
    body = api.serve(events(tool="run_code"), done_marker=done_marker)
    host, docs, notes = make_host()
    result = await run(api, host, ToolCallCode("run_code"))
    reference = await make_host()[0].run_source(json.loads(ARGUMENTS)["code"], speculate=False)
    assert result.status == "ok", result.error
    assert observable(result) == observable(reference)
    assert [c.lane for c in result.calls if c.method == "search"] == ["claimed", "claimed"]
    last = last_argument_delta(body.events)
    assert all(c.started < body.sent[last] for c in docs.calls_to("search")), (
        "reads started while streaming"
    )
    assert (
        len(notes.calls) == 1 and notes.calls[0].started > body.sent[last + 1]
    )  # the write after the seal


CUT_EVENTS = {
    "chat_create": lambda: chat_events(tool="run_code", finish="length"),
    "chat_helper": lambda: chat_events(tool="run_code", finish="length"),
    "responses_create": lambda: responses_events(
        tool="run_code", arguments=ARGUMENTS[:60], cut=True
    ),
    "responses_helper": lambda: responses_events(
        tool="run_code", arguments=ARGUMENTS[:60], cut=True
    ),
    # Anthropic closes the block, then says max_tokens: the cut explains the unfinished JSON.
    "messages_create": lambda: anthropic_events(
        tool="run_code", stop="max_tokens", arguments=ARGUMENTS[:60]
    ),
    "messages_helper": lambda: anthropic_events(
        tool="run_code", stop="max_tokens", arguments=ARGUMENTS[:60]
    ),
}


@pytest.mark.parametrize("way", sorted(WAYS))
async def test_a_reply_the_sdk_reports_cut_is_aborted_and_runs_nothing(way: str) -> None:
    run, _, done_marker = WAYS[way]
    api = FakeAPI()
    api.serve(CUT_EVENTS[way](), done_marker=done_marker)
    host, _, notes = make_host()
    result = await run(api, host, ToolCallCode("run_code"))
    assert result.status == "aborted", result
    assert result.error is not None and result.error.type == "StreamCut"
    assert result.calls == () and notes.calls == []


@pytest.mark.parametrize("way", ["chat_create", "messages_create", "messages_helper"])
async def test_a_text_reply_cut_by_the_token_limit_is_aborted(way: str) -> None:
    run, events, done_marker = WAYS[way]
    api = FakeAPI()
    reply = "for q in ['a', 'b']:\n    notes.save([q])\n"  # parses; the whole reply would stop after one
    cut = {"finish": "length"} if way.startswith("chat") else {"stop": "max_tokens"}
    api.serve(events(tool=None, text=reply, **cut), done_marker=done_marker)
    host, _, notes = make_host()
    result = await run(api, host, "raw")
    assert (
        result.status == "aborted" and result.error is not None and result.error.type == "StreamCut"
    )
    assert notes.calls == []


async def test_a_markdown_reply_runs_at_its_closing_fence_through_the_sdk() -> None:
    api = FakeAPI()
    reply = "Plan:\n```python\nx = docs.search('q')\nx\n```\n" + "Now some long explanation. " * 20
    body = api.serve(chat_events(tool=None, text=reply, finish="stop"), done_marker=True)
    host, _, _ = make_host()
    result = await chat_create(api, host, "markdown")
    assert result.status == "ok" and result.value == ["hit:q"]
    assert body.closed  # the rest of the reply was closed, not left open


async def test_sdk_objects_that_are_not_streams_are_type_errors_with_a_hint() -> None:
    api = FakeAPI()
    host, _, _ = make_host()
    manager = anthropic_client(api).messages.stream(**MESSAGES)
    with pytest.raises(TypeError, match="async with"):
        await host.run_stream(manager)
    coroutine = openai_client(api).chat.completions.create(**CHAT, stream=True)
    with pytest.raises(TypeError, match="await it"):
        await host.run_stream(coroutine)
    assert api.requests == []  # refused before anything was sent
    api.serve(chat_events(tool=None, text="1 + 1\n", finish="stop"), done_marker=True)
    assert (await host.run_stream(await coroutine)).value == 2  # what the hint says works
    api.serve(anthropic_events(tool=None, text="2 + 2\n", stop="end_turn"))
    async with manager as stream:
        assert (await host.run_stream(stream)).value == 4


async def chat_final(api: FakeAPI, host: Host) -> tuple[Any, Any]:
    async with openai_client(api).chat.completions.stream(**CHAT, tools=TOOLS_OPENAI) as stream:
        result = await host.run_stream(stream, code=ToolCallCode("run_code"))
        return result, (await stream.get_final_completion()).choices[0].message.tool_calls[
            0
        ].function.arguments


async def responses_final(api: FakeAPI, host: Host) -> tuple[Any, Any]:
    async with openai_client(api).responses.stream(
        model="gpt-test", input="go", tools=TOOLS_RESPONSES
    ) as stream:
        result = await host.run_stream(stream, code=ToolCallCode("run_code"))
        return result, (await stream.get_final_response()).output[0].arguments  # type: ignore[union-attr]


async def messages_final(api: FakeAPI, host: Host) -> tuple[Any, Any]:
    async with anthropic_client(api).messages.stream(**MESSAGES, tools=TOOLS_ANTHROPIC) as stream:
        result = await host.run_stream(stream, code=ToolCallCode("run_code"))
        return result, json.dumps((await stream.get_final_message()).content[0].input)  # type: ignore[union-attr]


FINALS = {
    "chat_helper": (chat_final, chat_events, True),
    "responses_helper": (responses_final, responses_events, False),
    "messages_helper": (messages_final, anthropic_events, False),
}


@pytest.mark.parametrize("way", sorted(FINALS))
async def test_a_tool_call_run_returns_with_the_whole_reply_read(way: str) -> None:
    """The reply's end events come 0.3 s after the call (the Guest is done long before): the
    run still returns only with them read, so the SDK's accumulated reply is complete (a
    closed response would make ``get_final_*()`` fail) and the call can be answered."""
    final, events, done_marker = FINALS[way]
    replied = events(tool="run_code")
    api = FakeAPI()
    body = api.serve(
        replied, done_marker=done_marker, tail=0.3, tail_after=last_argument_delta(replied) + 2
    )
    host, _, _ = make_host()
    result, arguments = await final(api, host)
    assert result.status == "ok" and json.loads(arguments) == json.loads(ARGUMENTS)
    assert len(body.sent) == len(replied)  # every event was sent and read
    assert result.report.wall_seconds >= 0.3  # the run waited for the end of the reply
