"""A local stand-in for OpenAI's and Anthropic's streaming APIs, so the examples run offline.

``FakeModel`` is a whole scripted model for an agent loop (it validates the conversation
as the real APIs do). Each function below returns an ``httpx2.AsyncClient`` whose transport answers every request with a
server-sent-event stream, at about 50 tokens per second, in which the model calls the tool
``run_code`` with ``{"code": <program>}`` (the arguments streamed as JSON deltas, as the real
APIs do). Pass it as ``http_client=`` to the SDK client; drop it to talk to the real API.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

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
        start = {
            "index": 0,
            "id": "call_1",
            "type": "function",
            "function": {"name": "run_code", "arguments": ""},
        }
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
        out = [
            event("message_start", {"message": message}),
            event("content_block_start", {"index": 0, "content_block": block}),
        ]
        for piece in _slices(json.dumps({"code": program})):
            out.append(
                event(
                    "content_block_delta",
                    {"index": 0, "delta": {"type": "input_json_delta", "partial_json": piece}},
                )
            )
        out.append(event("content_block_stop", {"index": 0}))
        out.append(
            event(
                "message_delta",
                {
                    "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                    "usage": {"output_tokens": 1},
                },
            )
        )
        out.append(event("message_stop", {}))
        return out

    return _client(events)


# -- a scripted model for the agent loops (examples/*_agent_loop.py) ---------------------------


class InvalidRequest(Exception):
    """A request the real API would refuse (HTTP 400): the fake says why."""


class FakeModel:
    """One scripted model behind OpenAI's Chat Completions and Responses APIs and Anthropic's
    Messages API, for a complete agent loop offline.

    Asked a question, it calls ``run_code`` with ``program`` (a sentence of text first);
    given the tool's result, it answers in text, quoting the result's first line, and calls
    no tool (the loop ends). Like the real APIs it refuses (HTTP 400, the SDK raises
    ``BadRequestError``) a conversation in which a tool call is not answered, or answered
    with the wrong id, or a Responses continuation whose ``previous_response_id`` or
    ``call_id`` it never gave. ``requests`` keeps every request body, for tests to check
    against the SDKs' request types. ``sync_client()``/``async_client()`` are the
    ``http_client=`` of the SDK clients.
    """

    def __init__(self, program: str, *, tokens_per_second: float = TOKENS_PER_SECOND) -> None:
        self.program = program
        self.pause = 1 / tokens_per_second
        self.requests: list[dict[str, object]] = []
        self.last_sent = 0.0
        """When the last event of a reply was sent (``time.monotonic()``)."""
        self._calls: dict[str, list[str]] = {}  # Responses: response id → its function call ids
        self._served = 0

    def sync_client(self) -> httpx2.Client:
        return httpx2.Client(transport=httpx2.MockTransport(lambda r: self._handle(r, sync=True)))

    def async_client(self) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(
            transport=httpx2.MockTransport(lambda r: self._handle(r, sync=False))
        )

    def _handle(self, request: httpx2.Request, *, sync: bool) -> httpx2.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        self._served += 1
        try:
            if request.url.path.endswith("/chat/completions"):
                events = self._chat(body)
            elif request.url.path.endswith("/responses"):
                events = self._responses(body)
            elif request.url.path.endswith("/messages"):
                events = self._messages(body)
            else:
                raise InvalidRequest(f"no such endpoint: {request.url.path}")
        except InvalidRequest as exc:
            error = {
                "type": "error",
                "error": {"type": "invalid_request_error", "message": str(exc)},
            }
            return httpx2.Response(400, json=error)
        headers = {"content-type": "text/event-stream"}
        if sync:
            return httpx2.Response(200, headers=headers, content=self._sync_body(events))
        return httpx2.Response(200, headers=headers, content=self._async_body(events))

    def _sync_body(self, events: list[str]) -> Iterator[bytes]:
        for event in events:
            time.sleep(self.pause)
            self.last_sent = time.monotonic()
            yield event.encode()

    async def _async_body(self, events: list[str]) -> AsyncIterator[bytes]:
        for event in events:
            await anyio.sleep(self.pause)
            self.last_sent = time.monotonic()
            yield event.encode()

    def _answer(self, result: str) -> str:
        return f"The program says: {result.splitlines()[0] if result else '(nothing)'}"

    @staticmethod
    def _tool(tools: object, name: str) -> None:
        if not isinstance(tools, list) or name not in [
            t.get("name") or t.get("function", {}).get("name") for t in tools
        ]:
            raise InvalidRequest(f"the request offers no tool {name!r}")

    # -- Chat Completions ---------------------------------------------------------------------

    def _chat(self, body: dict[str, Any]) -> list[str]:
        self._tool(body.get("tools"), "run_code")
        messages = body["messages"]
        for n, message in enumerate(messages):
            calls = (
                [c["id"] for c in message.get("tool_calls") or ()]
                if message["role"] == "assistant"
                else []
            )
            answered = [
                m.get("tool_call_id")
                for m in messages[n + 1 : n + 1 + len(calls)]
                if m["role"] == "tool"
            ]
            if sorted(answered) != sorted(calls):
                raise InvalidRequest(
                    f"messages[{n}]: tool calls {calls} must be followed by tool messages answering each"
                )
            if message["role"] == "tool" and (
                n == 0
                or not any(
                    message["tool_call_id"] in [c["id"] for c in m.get("tool_calls") or ()]
                    for m in messages[:n]
                    if m["role"] == "assistant"
                )
            ):
                raise InvalidRequest(
                    f"messages[{n}]: a tool message must answer a preceding tool call"
                )

        def chunk(delta: dict[str, object], finish: str | None = None) -> str:
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            data = {
                "id": f"chatcmpl-{self._served}",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "fake",
                "choices": [choice],
            }
            return f"data: {json.dumps(data)}\n\n"

        if messages[-1]["role"] == "tool":
            out = [chunk({"role": "assistant", "content": ""})]
            out += [
                chunk({"content": piece})
                for piece in _slices(self._answer(messages[-1]["content"]))
            ]
            return [*out, chunk({}, "stop"), "data: [DONE]\n\n"]
        call = f"call_{self._served}"
        start = {
            "index": 0,
            "id": call,
            "type": "function",
            "function": {"name": "run_code", "arguments": ""},
        }
        out = [
            chunk({"role": "assistant", "content": "Let me look."}),
            chunk({"tool_calls": [start]}),
        ]
        for piece in _slices(json.dumps({"code": self.program})):
            out.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}))
        return [*out, chunk({}, "tool_calls"), "data: [DONE]\n\n"]

    # -- Responses ------------------------------------------------------------------------------

    def _responses(self, body: dict[str, Any]) -> list[str]:
        self._tool(body.get("tools"), "run_code")
        items = (
            body["input"]
            if isinstance(body["input"], list)
            else [{"role": "user", "content": body["input"]}]
        )
        outputs = [i for i in items if i.get("type") == "function_call_output"]
        previous = body.get("previous_response_id")
        if outputs or previous is not None:
            if previous not in self._calls:
                raise InvalidRequest(
                    f"previous_response_id {previous!r} is not a response of this model"
                )
            if sorted(o["call_id"] for o in outputs) != sorted(self._calls[previous]):
                raise InvalidRequest(
                    f"no tool output found for every function call of {previous}: {self._calls[previous]}"
                )
        rid = f"resp_{self._served}"
        seq = iter(range(10_000))
        response = {"id": rid, "object": "response", "created_at": 0, "model": "fake", "status": "in_progress",
                    "output": [], "parallel_tool_calls": True, "tool_choice": "auto", "tools": []}  # fmt: skip

        def event(data: dict[str, Any]) -> str:
            return f"event: {data['type']}\ndata: {json.dumps({**data, 'sequence_number': next(seq)})}\n\n"

        out = [event({"type": "response.created", "response": response})]
        if outputs:
            text = self._answer(outputs[0]["output"])
            item = {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "in_progress",
                "content": [],
            }
            part = {"type": "output_text", "text": "", "annotations": []}
            at = {"output_index": 0, "item_id": "msg_1", "content_index": 0}
            out.append(
                event({"type": "response.output_item.added", "output_index": 0, "item": item})
            )
            out.append(event({"type": "response.content_part.added", **at, "part": part}))
            out += [
                event({"type": "response.output_text.delta", **at, "delta": p, "logprobs": []})
                for p in _slices(text)
            ]
            out.append(
                event({"type": "response.output_text.done", **at, "text": text, "logprobs": []})
            )
            out.append(
                event({"type": "response.content_part.done", **at, "part": {**part, "text": text}})
            )
            final = {**item, "status": "completed", "content": [{**part, "text": text}]}
            self._calls[rid] = []
        else:
            arguments = json.dumps({"code": self.program})
            item = {
                "type": "function_call",
                "id": "fc_1",
                "call_id": f"call_{self._served}",
                "name": "run_code",
                "arguments": "",
                "status": "in_progress",
            }
            out.append(
                event({"type": "response.output_item.added", "output_index": 0, "item": item})
            )
            out += [
                event(
                    {
                        "type": "response.function_call_arguments.delta",
                        "output_index": 0,
                        "item_id": "fc_1",
                        "delta": p,
                    }
                )
                for p in _slices(arguments)
            ]
            out.append(
                event(
                    {
                        "type": "response.function_call_arguments.done",
                        "output_index": 0,
                        "item_id": "fc_1",
                        "arguments": arguments,
                    }
                )
            )
            final = {**item, "arguments": arguments, "status": "completed"}
            self._calls[rid] = [item["call_id"]]
        out.append(event({"type": "response.output_item.done", "output_index": 0, "item": final}))
        out.append(
            event(
                {
                    "type": "response.completed",
                    "response": {**response, "status": "completed", "output": [final]},
                }
            )
        )
        return out

    # -- Anthropic Messages -----------------------------------------------------------------------

    def _messages(self, body: dict[str, Any]) -> list[str]:
        self._tool(body.get("tools"), "run_code")
        messages = body["messages"]
        for n, message in enumerate(messages):
            blocks = message["content"] if isinstance(message["content"], list) else []
            uses = (
                [b["id"] for b in blocks if b["type"] == "tool_use"]
                if message["role"] == "assistant"
                else []
            )
            following = (
                messages[n + 1]["content"]
                if n + 1 < len(messages) and isinstance(messages[n + 1]["content"], list)
                else []
            )
            results = [b["tool_use_id"] for b in following if b["type"] == "tool_result"]
            if uses and sorted(results) != sorted(uses):
                raise InvalidRequest(
                    f"messages.{n}: tool_use ids {uses} were found without tool_result blocks immediately after"
                )
            if any(b["type"] == "tool_result" for b in blocks) and not (
                n and messages[n - 1]["role"] == "assistant"
            ):
                raise InvalidRequest(
                    f"messages.{n}: tool_result blocks must follow the assistant's tool_use"
                )

        def event(kind: str, data: dict[str, object]) -> str:
            return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"

        message = {"id": f"msg_{self._served}", "type": "message", "role": "assistant", "model": "fake", "content": [],
                   "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}  # fmt: skip
        last = messages[-1]["content"]
        result = (
            next((b for b in last if b["type"] == "tool_result"), None)
            if isinstance(last, list)
            else None
        )
        text = self._answer(str(result["content"])) if result is not None else "Let me look."
        out = [event("message_start", {"message": message})]
        out.append(
            event(
                "content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}
            )
        )
        out += [
            event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": p}})
            for p in _slices(text)
        ]
        out.append(event("content_block_stop", {"index": 0}))
        stop = "end_turn"
        if result is None:
            block = {
                "type": "tool_use",
                "id": f"toolu_{self._served}",
                "name": "run_code",
                "input": {},
            }
            out.append(event("content_block_start", {"index": 1, "content_block": block}))
            for piece in _slices(json.dumps({"code": self.program})):
                out.append(
                    event(
                        "content_block_delta",
                        {"index": 1, "delta": {"type": "input_json_delta", "partial_json": piece}},
                    )
                )
            out.append(event("content_block_stop", {"index": 1}))
            stop = "tool_use"
        out.append(
            event(
                "message_delta",
                {
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 1},
                },
            )
        )
        out.append(event("message_stop", {}))
        return out
