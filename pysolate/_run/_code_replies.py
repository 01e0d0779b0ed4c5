"""The replies of ``CodeTool``: a run's result as each SDK's next messages.

Each SDK wants a tool call answered in its own shape, after the assistant's turn as it was
(with the id of every call): OpenAI chat an assistant message then one ``tool`` message per
call, Anthropic the assistant's content blocks then a user turn of ``tool_result`` blocks,
Responses a ``function_call_output`` per call (the rest is on the server, reached with
``previous_response_id``). Everything is read duck-typed from the SDK's whole reply (its
pydantic models, or their ``model_dump()`` dicts), so no SDK is imported here; the shapes
built are the SDKs' param ``TypedDict``s (tests/pysolate/test_code_tool.py checks them
against the installed SDKs).

Only the *first* call of the code tool runs (``ToolCallCode``'s rule); a further one is
answered with ``not_run``, so the conversation stays valid when a model calls the tool
twice in one reply.
"""

from __future__ import annotations

import json
from typing import Any

from .._report._result import RunResult, RunStatus
from .._report._result_text import result_text
from ..streams import ToolCallCode


def _get(obj: object, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def _whole(reply: object, field: str, what: str) -> Any:
    """``reply.field``, or ``TypeError`` when ``reply`` is not the SDK's whole reply."""
    value = _get(reply, field)
    if value is None or isinstance(value, str):
        raise TypeError(f"expected the whole reply, {what}, not {type(reply).__name__}")
    return value


def _verify(code: ToolCallCode, arguments: object, result: RunResult) -> None:
    """``ValueError`` when ``result`` sealed another program than this call's argument."""
    if result.source is None:
        return  # nothing was sealed (bad arguments, a cut reply): the result says why
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return
    program = arguments.get(code.argument) if isinstance(arguments, dict) else None
    if program != result.source:
        raise ValueError(
            f"the result is not of this reply's {code.tool} call: it ran another program "
            "(pass the RunResult of run_stream(...) on this reply's own stream)"
        )


def openai_chat_reply(
    code: ToolCallCode, not_run: str, completion: object, result: RunResult
) -> list[dict[str, Any]]:
    """``CodeTool.openai_chat_reply``."""
    choices = _whole(completion, "choices", "a ChatCompletion (stream.get_final_completion())")
    message = _get(choices[0], "message") if choices else None
    calls = list(_get(message, "tool_calls") or ())
    ours = [
        c
        for c in calls
        if _get(c, "type") == "function" and _get(_get(c, "function"), "name") == code.tool
    ]
    if not ours:
        return []
    _verify(code, _get(_get(ours[0], "function"), "arguments"), result)
    assistant: dict[str, Any] = {"role": "assistant", "tool_calls": [_chat_call(c) for c in calls]}
    if _get(message, "content"):
        assistant["content"] = _get(message, "content")
    answers = [
        {"role": "tool", "tool_call_id": _get(ours[0], "id"), "content": result_text(result)}
    ]
    answers += [
        {"role": "tool", "tool_call_id": _get(c, "id"), "content": not_run} for c in ours[1:]
    ]
    return [assistant, *answers]


def _chat_call(call: object) -> dict[str, Any]:
    kind = _get(call, "type")
    if kind == "custom":
        custom = _get(call, "custom")
        return {
            "id": _get(call, "id"),
            "type": "custom",
            "custom": {"name": _get(custom, "name"), "input": _get(custom, "input")},
        }
    function = _get(call, "function")
    return {
        "id": _get(call, "id"),
        "type": "function",
        "function": {"name": _get(function, "name"), "arguments": _get(function, "arguments")},
    }


def openai_responses_reply(
    code: ToolCallCode, not_run: str, response: object, result: RunResult
) -> list[dict[str, Any]]:
    """``CodeTool.openai_responses_reply``."""
    output = _whole(response, "output", "a Response (stream.get_final_response())")
    calls = [
        i for i in output if _get(i, "type") == "function_call" and _get(i, "name") == code.tool
    ]
    if not calls:
        return []
    _verify(code, _get(calls[0], "arguments"), result)
    answers = [
        {
            "type": "function_call_output",
            "call_id": _get(calls[0], "call_id"),
            "output": result_text(result),
        }
    ]
    answers += [
        {"type": "function_call_output", "call_id": _get(c, "call_id"), "output": not_run}
        for c in calls[1:]
    ]
    return answers


def anthropic_reply(
    code: ToolCallCode, not_run: str, message: object, result: RunResult
) -> list[dict[str, Any]]:
    """``CodeTool.anthropic_reply``."""
    content = _whole(message, "content", "a Message (stream.get_final_message())")
    uses = [b for b in content if _get(b, "type") == "tool_use" and _get(b, "name") == code.tool]
    if not uses:
        return []
    _verify(code, _get(uses[0], "input"), result)
    results: list[dict[str, Any]] = [
        {
            "type": "tool_result",
            "tool_use_id": _get(uses[0], "id"),
            "content": result_text(result),
            "is_error": result.status is not RunStatus.OK,
        }
    ]
    results += [
        {"type": "tool_result", "tool_use_id": _get(b, "id"), "content": not_run, "is_error": True}
        for b in uses[1:]
    ]
    return [
        {"role": "assistant", "content": [_block(b) for b in content]},
        {"role": "user", "content": results},
    ]


_BLOCK_FIELDS = {
    "text": ("text",),
    "tool_use": ("id", "name", "input"),
    "thinking": ("thinking", "signature"),
    "redacted_thinking": ("data",),
}
"""The fields of the content blocks a reply to a tool use carries back, as the Messages API
takes them (the SDK's response models add fields a request must not carry)."""


def _block(block: object) -> dict[str, Any]:
    kind = _get(block, "type")
    fields = _BLOCK_FIELDS.get(kind)
    if fields is not None:
        return {"type": kind, **{name: _get(block, name) for name in fields}}
    dump = getattr(block, "model_dump", None)
    return dump(mode="json", exclude_none=True) if callable(dump) else dict(block)  # type: ignore[call-overload]
