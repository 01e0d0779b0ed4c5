"""A local stand-in for OpenAI's and Anthropic's streaming APIs, so the examples run offline.

Each function returns an ``httpx2.AsyncClient`` whose transport answers every request with a
server-sent-event stream, at about 50 tokens per second, in which the model calls the tool
``run_code`` with ``{"code": <program>}`` (the arguments streamed as JSON deltas, as the real
APIs do). Pass it as ``http_client=`` to the SDK client; drop it to talk to the real API.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable

import anyio
import httpx2

TOKENS_PER_SECOND = 50
CHARS_PER_TOKEN = 4


def _slices(text: str) -> list[str]:
    return [text[i : i + CHARS_PER_TOKEN] for i in range(0, len(text), CHARS_PER_TOKEN)]


def _client(events: Callable[[], list[str]]) -> httpx2.AsyncClient:
    async def body() -> AsyncIterator[bytes]:
        for event in events():
            await anyio.sleep(1 / TOKENS_PER_SECOND)
            yield event.encode()

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body())

    return httpx2.AsyncClient(transport=httpx2.MockTransport(handler))


def openai_chat(program: str) -> httpx2.AsyncClient:
    """Chat Completions chunks: ``choices[0].delta.tool_calls[0].function.arguments``."""

    def chunk(delta: dict[str, object], finish: str | None = None) -> str:
        data = {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "fake",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return f"data: {json.dumps(data)}\n\n"

    def events() -> list[str]:
        start = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "run_code", "arguments": ""}}
        out = [chunk({"role": "assistant", "tool_calls": [start]})]
        for piece in _slices(json.dumps({"code": program})):
            out.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}))
        out.append(chunk({}, "tool_calls"))
        out.append("data: [DONE]\n\n")
        return out

    return _client(events)


def anthropic_messages(program: str) -> httpx2.AsyncClient:
    """Messages events: a ``tool_use`` block whose ``input_json_delta``s carry the arguments."""

    def event(kind: str, data: dict[str, object]) -> str:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"

    def events() -> list[str]:
        message = {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "fake",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
        block = {"type": "tool_use", "id": "toolu_1", "name": "run_code", "input": {}}
        out = [event("message_start", {"message": message}), event("content_block_start", {"index": 0, "content_block": block})]
        for piece in _slices(json.dumps({"code": program})):
            out.append(event("content_block_delta", {"index": 0, "delta": {"type": "input_json_delta", "partial_json": piece}}))
        out.append(event("content_block_stop", {"index": 0}))
        out.append(event("message_delta", {"delta": {"stop_reason": "tool_use", "stop_sequence": None}, "usage": {"output_tokens": 1}}))
        out.append(event("message_stop", {}))
        return out

    return _client(events)
