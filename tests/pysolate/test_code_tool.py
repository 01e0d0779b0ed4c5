"""``CodeTool`` and ``result_text``: the raw-SDK code tool, checked against the real SDKs.

The definitions are valid values of the SDKs' own param types (checked strictly: no
unknown key, every required one, ``sdk_types.check``) and describe every callable with
its signature, effect and docstring. The replies, built from the SDKs' response models,
are valid message params, answer every call of the tool (the first with the result) and
refuse a result that is not the call's. End to end, a whole agent loop on each API, sync
and async, runs against a local fake model that refuses an unanswered call as the real
APIs do; every request it got is a valid request of the SDK's types.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from anthropic.types import Message, MessageParam, ToolParam
from anthropic.types.message_create_params import MessageCreateParamsStreaming
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageParam,
)
from openai.types.chat.completion_create_params import CompletionCreateParamsStreaming
from openai.types.responses import FunctionToolParam, Response, ResponseInputItemParam
from openai.types.responses.response_create_params import ResponseCreateParamsStreaming
from sdk_types import check

from pysolate import CodeTool, Effect, Host, RunResult, RunStatus, SyncHost, capability, result_text
from pysolate.testing import in_process_guest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from fake_llm import FakeModel

pytestmark = pytest.mark.anyio

PROGRAM = 'hits = docs.search("retries")\nnotes.save(hits)\nprint(len(hits), "hits")\nhits[0]\n'


class Docs:
    @capability(effect=Effect.PURE, version="1")
    async def search(self, query: str, limit: int = 2) -> list[str]:
        """Search the documentation.

        Returns the titles of the matching pages."""
        return [f"{query}: page {n}" for n in range(1, limit + 1)]


class Notes:
    @capability(effect=Effect.WRITE)
    def save(self, items: list[str]) -> int:
        return len(items)


@capability(effect=Effect.LIVE_READ)
def now() -> float:
    """The current time, in seconds."""
    return 0.0


def make_host() -> Host:
    host = Host(guest_factory=in_process_guest)
    host.register("docs", Docs())
    host.register("notes", Notes())
    host.register("now", now)
    return host


# -- definitions -------------------------------------------------------------------------------


def test_description_lists_every_callable_with_signature_effect_and_docstring() -> None:
    text = CodeTool(make_host()).description()
    assert text.startswith("Run a Python program in an isolated interpreter")
    assert "nothing persists between calls" in text
    assert (
        "- docs.search(query: str, limit: int = 2) -> list[str]  [pure: same arguments, same result, no side effects]\n"
        "    Search the documentation.\n\n    Returns the titles of the matching pages.\n"
    ) in text
    assert text.endswith("- notes.save(items: list[str]) -> int  [changes something]")
    assert "- now() -> float  [reads live data]\n    The current time, in seconds." in text
    assert (
        "Variables, functions and imports persist"
        in CodeTool(make_host(), persistent=True).description()
    )
    assert "can call" not in CodeTool(Host(guest_factory=in_process_guest)).description()


def test_definitions_are_valid_values_of_each_sdks_tool_type() -> None:
    tool = CodeTool(make_host(), name="python", argument="source")
    check(ChatCompletionFunctionToolParam, tool.openai_chat())
    check(FunctionToolParam, tool.openai_responses())
    check(ToolParam, tool.anthropic())
    assert (
        tool.openai_chat()["function"]["name"]
        == tool.openai_responses()["name"]
        == tool.anthropic()["name"]
        == "python"
    )
    schema = tool.anthropic()["input_schema"]
    assert schema["required"] == ["source"] and schema["properties"]["source"]["type"] == "string"
    assert tool.code.tool == "python" and tool.code.argument == "source"


def test_the_checker_itself_refuses_a_misspelt_key() -> None:
    """The strict check can fail: a typo the SDK's TypedDict would silently carry."""
    bad = {"type": "function", "function": {"name": "run_code", "descripton": "x"}}
    with pytest.raises(AssertionError, match="has no keys \\['descripton'\\]"):
        check(ChatCompletionFunctionToolParam, bad)


# -- result_text ---------------------------------------------------------------------------------


async def test_result_text_says_value_output_and_what_may_have_changed() -> None:
    host = make_host()
    ok = await host.run_source(PROGRAM, speculate=False)
    assert result_text(ok) == (
        "The code ran. Value of the last expression: 'retries: page 1'\n"
        "Calls that may have changed something, in order: notes.save (ok)\n"
        "It printed:\n2 hits\n"
    )
    raised = await host.run_source("print('a')\nnotes.save(['x'])\n1 / 0\n", speculate=False)
    assert result_text(raised) == (
        "The code raised at line 3: ZeroDivisionError: division by zero\n"
        "Calls that may have changed something, in order: notes.save (ok)\nIt printed:\na\n"
    )
    rejected = await host.run_source("x = (\n", speculate=False)
    assert result_text(rejected).startswith("The code was rejected at line 1: SyntaxError: ")
    assert result_text(rejected).endswith("Nothing ran.")

    async def dropped() -> AsyncIterator[str]:
        yield "notes.save(['x'])\n"
        raise ConnectionError("dropped")

    aborted = await host.run_stream(dropped())
    assert (
        result_text(aborted)
        == "The code was stopped (aborted): ConnectionError: the stream failed: dropped"
    )
    assert result_text(RunResult(status=RunStatus.ABORTED, guest_status="limit")) == (
        "The code was stopped (limit): no error information"
    )


def test_result_text_cuts_long_values_and_output_saying_so() -> None:
    result = RunResult(status=RunStatus.OK, value="v" * 50, stdout="o" * 30)
    assert result_text(result, limit=10) == (
        f"The code ran. Value of the last expression: '{'v' * 9}… (42 more characters not shown)\n"
        f"It printed:\n{'o' * 10}… (20 more characters not shown)"
    )


async def test_a_forgotten_await_is_a_type_error_naming_it() -> None:
    pending = make_host().run_source("1")
    try:
        with pytest.raises(
            TypeError, match=r"un-awaited coroutine: await it \(result = await host.run_stream"
        ):
            result_text(pending)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="un-awaited coroutine"):
            CodeTool(make_host()).openai_chat_reply(chat_completion([]), pending)  # type: ignore[arg-type]
    finally:
        pending.close()


# -- replies, from the SDKs' response models --------------------------------------------------------


def chat_completion(
    calls: list[tuple[str, str, str]], content: str | None = "Let me look."
) -> ChatCompletion:
    tool_calls = [
        {"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in calls
    ]
    message = {"role": "assistant", "content": content, "tool_calls": tool_calls or None}
    return ChatCompletion.model_validate(
        {
            "id": "c",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [
                {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
            ],
        }
    )


def anthropic_message(uses: list[tuple[str, str, dict[str, Any]]]) -> Message:
    content: list[dict[str, Any]] = [{"type": "text", "text": "Let me look.", "citations": None}]
    content += [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in uses]
    return Message.model_validate(
        {
            "id": "m",
            "type": "message",
            "role": "assistant",
            "model": "m",
            "content": content,
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    )


def responses_response(calls: list[tuple[str, str, str]]) -> Response:
    output = [
        {
            "type": "function_call",
            "id": f"fc_{i}",
            "call_id": i,
            "name": n,
            "arguments": a,
            "status": "completed",
        }
        for i, n, a in calls
    ]
    return Response.model_validate(
        {
            "id": "r",
            "object": "response",
            "created_at": 0,
            "model": "m",
            "status": "completed",
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        }
    )


async def test_replies_are_valid_params_and_answer_every_call_of_the_tool() -> None:
    host = make_host()
    result = await host.run_source(PROGRAM, speculate=False)
    tool = CodeTool(host)
    args = json.dumps({"code": PROGRAM})
    calls = [("c1", "run_code", args), ("c2", "lookup", "{}"), ("c3", "run_code", args)]
    chat = tool.openai_chat_reply(chat_completion(calls), result)
    check(list[ChatCompletionMessageParam], chat)
    assert [m["role"] for m in chat] == ["assistant", "tool", "tool"]
    assert [c["id"] for c in chat[0]["tool_calls"]] == ["c1", "c2", "c3"] and chat[0][
        "content"
    ] == "Let me look."
    assert chat[1] == {"role": "tool", "tool_call_id": "c1", "content": result_text(result)}
    assert chat[2] == {"role": "tool", "tool_call_id": "c3", "content": tool.not_run_text()}
    assert tool.not_run_text().startswith("Not run: only the first run_code call of a reply runs.")

    uses = [("t1", "run_code", {"code": PROGRAM}), ("t2", "run_code", {"code": "2"})]
    turn = tool.anthropic_reply(anthropic_message(uses), result)
    check(list[MessageParam], turn)
    assert turn[0]["content"][0] == {"type": "text", "text": "Let me look."}
    assert turn[0]["content"][1] == {
        "type": "tool_use",
        "id": "t1",
        "name": "run_code",
        "input": {"code": PROGRAM},
    }
    assert turn[1] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": result_text(result), "is_error": False},
        {"type": "tool_result", "tool_use_id": "t2", "content": tool.not_run_text(), "is_error": True},
    ]}  # fmt: skip

    items = tool.openai_responses_reply(responses_response(calls), result)
    check(list[ResponseInputItemParam], items)
    assert items == [
        {"type": "function_call_output", "call_id": "c1", "output": result_text(result)},
        {"type": "function_call_output", "call_id": "c3", "output": tool.not_run_text()},
    ]
    # The dict form (``model_dump()``) reads the same.
    assert tool.openai_chat_reply(chat_completion(calls).model_dump(), result) == chat


async def test_a_failed_run_is_an_error_result_for_anthropic() -> None:
    host = make_host()
    result = await host.run_source("1 / 0\n", speculate=False)
    (_, user) = CodeTool(host).anthropic_reply(
        anthropic_message([("t1", "run_code", {"code": "1 / 0\n"})]), result
    )
    assert user["content"][0]["is_error"] is True
    assert user["content"][0]["content"].startswith("The code raised at line 1: ZeroDivisionError")


async def test_no_call_of_the_tool_is_no_reply_and_the_wrong_result_is_refused() -> None:
    host = make_host()
    tool = CodeTool(host)
    result = await host.run_source(PROGRAM, speculate=False)
    assert tool.openai_chat_reply(chat_completion([], content="Done."), result) == []
    assert tool.anthropic_reply(anthropic_message([("t", "lookup", {})]), result) == []
    assert tool.openai_responses_reply(responses_response([]), result) == []
    other = json.dumps({"code": "1 + 1\n"})
    with pytest.raises(
        ValueError, match="the result is not of this reply's run_code call: it ran another program"
    ):
        tool.openai_chat_reply(chat_completion([("c1", "run_code", other)]), result)
    with pytest.raises(
        TypeError, match=r"expected the whole reply, a Message \(stream.get_final_message\(\)\)"
    ):
        tool.anthropic_reply(object(), result)


# -- whole agent loops against the fake model -----------------------------------------------------

QUESTION = "How do retries work?"


async def chat_loop(model: FakeModel, host: Host, sync: bool) -> tuple[str, list[RunResult]]:
    tool, results = CodeTool(host), []
    messages: list[Any] = [{"role": "user", "content": QUESTION}]
    if sync:
        client, blocking = (
            openai.OpenAI(api_key="k", http_client=model.sync_client()),
            SyncHost(host),
        )
        while True:
            with client.chat.completions.stream(
                model="m", messages=messages, tools=[tool.openai_chat()]
            ) as stream:
                results.append(blocking.run_stream(stream, code=tool.code))
                completion = stream.get_final_completion()
            if not (reply := tool.openai_chat_reply(completion, results[-1])):
                blocking.close()
                return str(completion.choices[0].message.content), results
            messages += reply
    aclient = openai.AsyncOpenAI(api_key="k", http_client=model.async_client())
    while True:
        async with aclient.chat.completions.stream(
            model="m", messages=messages, tools=[tool.openai_chat()]
        ) as astream:
            results.append(await host.run_stream(astream, code=tool.code))
            completion = await astream.get_final_completion()
        if not (reply := tool.openai_chat_reply(completion, results[-1])):
            return str(completion.choices[0].message.content), results
        messages += reply


async def responses_loop(model: FakeModel, host: Host, sync: bool) -> tuple[str, list[RunResult]]:
    tool, results = CodeTool(host), []
    items: list[Any] = [{"role": "user", "content": QUESTION}]
    previous = None
    if sync:
        client, blocking = (
            openai.OpenAI(api_key="k", http_client=model.sync_client()),
            SyncHost(host),
        )
        while True:
            with client.responses.stream(
                model="m",
                input=items,
                tools=[tool.openai_responses()],
                previous_response_id=previous,
            ) as stream:
                results.append(blocking.run_stream(stream, code=tool.code))
                response = stream.get_final_response()
            if not (items := tool.openai_responses_reply(response, results[-1])):
                blocking.close()
                return response.output_text, results
            previous = response.id
    aclient = openai.AsyncOpenAI(api_key="k", http_client=model.async_client())
    while True:
        async with aclient.responses.stream(
            model="m", input=items, tools=[tool.openai_responses()], previous_response_id=previous
        ) as astream:
            results.append(await host.run_stream(astream, code=tool.code))
            response = await astream.get_final_response()
        if not (items := tool.openai_responses_reply(response, results[-1])):
            return response.output_text, results
        previous = response.id


async def anthropic_loop(model: FakeModel, host: Host, sync: bool) -> tuple[str, list[RunResult]]:
    tool, results = CodeTool(host), []
    messages: list[Any] = [{"role": "user", "content": QUESTION}]
    if sync:
        client, blocking = (
            anthropic.Anthropic(api_key="k", http_client=model.sync_client()),
            SyncHost(host),
        )
        while True:
            with client.messages.stream(
                model="m", max_tokens=500, messages=messages, tools=[tool.anthropic()]
            ) as stream:
                results.append(blocking.run_stream(stream, code=tool.code))
                message = stream.get_final_message()
            if not (reply := tool.anthropic_reply(message, results[-1])):
                blocking.close()
                return message.content[0].text, results  # type: ignore[union-attr]
            messages += reply
    aclient = anthropic.AsyncAnthropic(api_key="k", http_client=model.async_client())
    while True:
        async with aclient.messages.stream(
            model="m", max_tokens=500, messages=messages, tools=[tool.anthropic()]
        ) as astream:
            results.append(await host.run_stream(astream, code=tool.code))
            message = await astream.get_final_message()
        if not (reply := tool.anthropic_reply(message, results[-1])):
            return message.content[0].text, results  # type: ignore[union-attr]
        messages += reply


LOOPS = {
    "openai_chat": (chat_loop, CompletionCreateParamsStreaming),
    "openai_responses": (responses_loop, ResponseCreateParamsStreaming),
    "anthropic": (anthropic_loop, MessageCreateParamsStreaming),
}


@pytest.mark.parametrize("sync", [False, True], ids=["async", "sync"])
@pytest.mark.parametrize("api", sorted(LOOPS))
async def test_a_whole_agent_loop_runs_to_the_models_answer(api: str, sync: bool) -> None:
    loop, request_type = LOOPS[api]
    model = FakeModel(PROGRAM, tokens_per_second=2000)
    answer, results = await loop(model, make_host(), sync)
    assert [r.status for r in results] == [
        "ok",
        "rejected",
    ]  # the second reply calls no tool: the loop's end
    assert results[1].error is not None and results[1].error.type == "NoCodeBlock"
    assert (
        answer == "The program says: The code ran. Value of the last expression: 'retries: page 1'"
    )
    assert [c.lane for c in results[0].calls] == [
        "claimed",
        "direct",
    ]  # the search started while streaming
    assert len(model.requests) == 2
    for body in model.requests:
        check(request_type, body)


async def test_the_fake_model_refuses_an_unanswered_call_as_the_apis_do() -> None:
    """The fake's validation can fail: the assistant's turn without the tool's answer."""
    model = FakeModel(PROGRAM, tokens_per_second=2000)
    tool = CodeTool(make_host())
    client = anthropic.AsyncAnthropic(api_key="k", http_client=model.async_client(), max_retries=0)
    messages: list[Any] = [{"role": "user", "content": QUESTION}]
    async with client.messages.stream(
        model="m", max_tokens=500, messages=messages, tools=[tool.anthropic()]
    ) as stream:
        message = await stream.get_final_message()
    messages.append({"role": "assistant", "content": message.content})
    messages.append({"role": "user", "content": "and?"})
    with pytest.raises(
        anthropic.BadRequestError, match="without tool_result blocks immediately after"
    ):
        async with client.messages.stream(
            model="m", max_tokens=500, messages=messages, tools=[tool.anthropic()]
        ) as stream:
            await stream.get_final_message()
