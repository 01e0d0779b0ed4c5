"""Dict-shaped stream events of the SDKs (their ``model_dump()`` form), for the adapter tests.

Each ``*_tool_call`` function gives the events of one reply that calls ``tool`` with the
JSON ``arguments`` cut into ``pieces``, preceded by some text and by a call of another
tool, followed by the SDK's end-of-reply events (``cut`` replaces the normal end reason).
"""

from __future__ import annotations

from typing import Any

Event = dict[str, Any]


def slices(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def chat_chunk(delta: dict[str, Any], finish: str | None = None) -> Event:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def openai_chat_tool_call(
    tool: str, arguments: str, size: int = 5, *, cut: str | None = None
) -> list[Event]:
    events = [chat_chunk({"role": "assistant", "content": "Let me check."})]
    events.append(
        chat_chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "c0",
                        "type": "function",
                        "function": {"name": "lookup", "arguments": ""},
                    }
                ]
            }
        )
    )
    events.append(
        chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"q": "x"}'}}]})
    )
    events.append(
        chat_chunk(
            {
                "tool_calls": [
                    {
                        "index": 1,
                        "id": "c1",
                        "type": "function",
                        "function": {"name": tool, "arguments": ""},
                    }
                ]
            }
        )
    )
    for piece in slices(arguments, size):
        events.append(chat_chunk({"tool_calls": [{"index": 1, "function": {"arguments": piece}}]}))
    events.append(
        chat_chunk(
            {
                "tool_calls": [
                    {
                        "index": 2,
                        "id": "c2",
                        "type": "function",
                        "function": {"name": tool, "arguments": '{"code": "other"}'},
                    }
                ]
            }
        )
    )
    events.append(chat_chunk({}, finish=cut or "tool_calls"))
    events.append(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "choices": [],
            "usage": {"total_tokens": 9},
        }
    )
    return events


def openai_responses_tool_call(
    tool: str, arguments: str, size: int = 5, *, cut: str | None = None
) -> list[Event]:
    events: list[Event] = [
        {"type": "response.created", "response": {"id": "r1", "status": "in_progress"}},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"type": "message", "id": "m0"},
        },
        {
            "type": "response.output_text.delta",
            "output_index": 0,
            "item_id": "m0",
            "delta": "Checking.",
        },
        {
            "type": "response.output_item.added",
            "output_index": 1,
            "item": {"type": "function_call", "id": "fc1", "name": "lookup", "arguments": ""},
        },
        {
            "type": "response.function_call_arguments.delta",
            "output_index": 1,
            "item_id": "fc1",
            "delta": '{"q": 1}',
        },
        {
            "type": "response.output_item.added",
            "output_index": 2,
            "item": {"type": "function_call", "id": "fc2", "name": tool, "arguments": ""},
        },
    ]
    for piece in slices(arguments, size):
        events.append(
            {
                "type": "response.function_call_arguments.delta",
                "output_index": 2,
                "item_id": "fc2",
                "delta": piece,
            }
        )
    if cut is None:
        events.append(
            {
                "type": "response.function_call_arguments.done",
                "output_index": 2,
                "item_id": "fc2",
                "arguments": arguments,
            }
        )
        events.append(
            {
                "type": "response.output_item.done",
                "output_index": 2,
                "item": {"type": "function_call", "id": "fc2"},
            }
        )
        events.append(
            {"type": "response.completed", "response": {"id": "r1", "status": "completed"}}
        )
    else:
        events.append(
            {
                "type": "response.incomplete",
                "response": {"id": "r1", "incomplete_details": {"reason": cut}},
            }
        )
    return events


def anthropic_tool_call(
    tool: str, arguments: str, size: int = 5, *, cut: str | None = None
) -> list[Event]:
    events: list[Event] = [
        {"type": "message_start", "message": {"id": "msg_1", "role": "assistant", "content": []}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "Running it."},
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "tool_use", "id": "t1", "name": "lookup", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '{"q": 2}'},
        },
        {"type": "content_block_stop", "index": 1},
        {
            "type": "content_block_start",
            "index": 2,
            "content_block": {"type": "tool_use", "id": "t2", "name": tool, "input": {}},
        },
        {"type": "ping"},
    ]
    for piece in slices(arguments, size):
        events.append(
            {
                "type": "content_block_delta",
                "index": 2,
                "delta": {"type": "input_json_delta", "partial_json": piece},
            }
        )
    events.append({"type": "content_block_stop", "index": 2})
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": cut or "tool_use"},
            "usage": {"output_tokens": 9},
        }
    )
    events.append({"type": "message_stop"})
    return events


SHAPES = {
    "openai_chat": openai_chat_tool_call,
    "openai_responses": openai_responses_tool_call,
    "anthropic": anthropic_tool_call,
}
CUTS = {"openai_chat": "length", "openai_responses": "max_output_tokens", "anthropic": "max_tokens"}
