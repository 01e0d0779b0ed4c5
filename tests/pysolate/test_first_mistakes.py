"""The first mistakes a new user makes each get an error that says what to do, at the call.

- a whole SDK reply (``create(...)`` without ``stream=True``: a ``ChatCompletion``, a
  ``Response``, a ``Message``, or their ``model_dump()``) passed as the stream: a
  ``TypeError`` naming it and "pass stream=True", before anything starts, in both APIs
  and in the stream helpers;
- text under ``ToolCallCode`` (an SDK's ``text_stream``, ``str`` chunks of prose): the run
  is ``rejected`` at the first chunk, the error saying the stream is text;
- a class passed to ``register``: "register an instance";
- a forgotten ``await``: the type checker says so (mypy's "Maybe you forgot to use
  "await"?"), and ``result_text``/``CodeTool`` name it at run time
  (``test_code_tool.py``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from pydantic import BaseModel

from pysolate import Effect, Host, RegistrationError, SyncHost, capability
from pysolate.streams import ToolCallCode, text_chunks, tool_arguments
from pysolate.testing import in_process_guest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from fake_llm import FakeModel

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]

COMPLETION = {
    "id": "c", "object": "chat.completion", "created": 0, "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "1 + 1"}, "finish_reason": "stop"}],
}  # fmt: skip
RESPONSE = {
    "id": "r", "object": "response", "created_at": 0, "model": "m", "status": "completed", "output": [],
    "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
}  # fmt: skip
MESSAGE = {
    "id": "m", "type": "message", "role": "assistant", "model": "m", "content": [{"type": "text", "text": "1 + 1"}],
    "stop_reason": "end_turn", "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1},
}  # fmt: skip


def json_api() -> httpx2.AsyncClient:
    """Answers as the APIs do without ``stream=True``: the whole reply as JSON."""

    def handler(request: httpx2.Request) -> httpx2.Response:
        path = request.url.path
        body = (
            COMPLETION
            if path.endswith("/chat/completions")
            else RESPONSE
            if path.endswith("/responses")
            else MESSAGE
        )
        return httpx2.Response(200, json=body)

    return httpx2.AsyncClient(transport=httpx2.MockTransport(handler))


async def whole_replies() -> dict[str, tuple[object, str]]:
    """Each SDK's whole reply, got the way a user forgets ``stream=True``, with the hint."""
    oa = openai.AsyncOpenAI(api_key="k", http_client=json_api())
    an = anthropic.AsyncAnthropic(api_key="k", http_client=json_api())
    chat = await oa.chat.completions.create(model="m", messages=[{"role": "user", "content": "go"}])
    response = await oa.responses.create(model="m", input="go")
    message = await an.messages.create(
        model="m", max_tokens=10, messages=[{"role": "user", "content": "go"}]
    )
    return {
        "ChatCompletion": (
            chat,
            "pass stream=True to client.chat.completions.create(...), or use client.chat.completions.stream(...)",
        ),
        "Response": (
            response,
            "pass stream=True to client.responses.create(...), or use client.responses.stream(...)",
        ),
        "Message": (
            message,
            "pass stream=True to client.messages.create(...), or use client.messages.stream(...)",
        ),
    }


async def test_a_whole_reply_is_named_with_pass_stream_true_in_both_apis_and_the_helpers() -> None:
    host = Host(guest_factory=in_process_guest)
    for name, (reply, fix) in (await whole_replies()).items():
        message = (
            f"expected a stream, got a complete {name} (the whole reply, not its stream): {fix}"
        )
        for form in (reply, reply.model_dump()):  # type: ignore[attr-defined]
            with pytest.raises(TypeError) as raised:
                await host.run_stream(form)
            assert str(raised.value) == message
            with pytest.raises(TypeError) as raised:
                SyncHost(host).run_stream(form)
            assert str(raised.value) == message
            with pytest.raises(TypeError, match="pass stream=True"):
                await anext(text_chunks(form))
            with pytest.raises(TypeError, match="pass stream=True"):
                await anext(tool_arguments(form, "run_code"))


async def test_another_pydantic_model_is_named_too() -> None:
    class Reply(BaseModel):
        text: str

    with pytest.raises(TypeError) as raised:
        await Host(guest_factory=in_process_guest).run_stream(Reply(text="1"))
    assert str(raised.value) == (
        "expected a stream, got the pydantic model Reply (iterating it gives its fields): pass the stream of events"
    )


async def test_text_under_tool_call_code_says_the_stream_is_text() -> None:
    host = Host(guest_factory=in_process_guest)
    result = await host.run_stream(["Let me think", " about it.\n"], code=ToolCallCode("run_code"))
    assert result.status == "rejected" and result.error is not None
    assert result.error.type == "ToolArgumentsError"
    assert result.error.message == (
        "ToolCallCode('run_code') reads that tool call's JSON arguments, but the stream is text "
        "('Let me think'): pass the SDK's stream of events itself (not its text_stream or "
        "text_chunks(...)), or code='raw' or 'markdown' for a program in the text; nothing was run"
    )
    # The SDK's own text stream, the usual way to get there.
    client = anthropic.AsyncAnthropic(
        api_key="k", http_client=FakeModel("1\n", tokens_per_second=2000).async_client()
    )
    tools: list[Any] = [{"name": "run_code", "input_schema": {"type": "object"}}]
    async with client.messages.stream(
        model="m", max_tokens=10, messages=[{"role": "user", "content": "go"}], tools=tools
    ) as stream:
        result = await host.run_stream(stream.text_stream, code=ToolCallCode("run_code"))
    assert (
        result.error is not None
        and "the stream is text ('Let '): pass the SDK's stream of events itself"
        in result.error.message
    )
    # JSON text, even after blank space, is still the arguments.
    ok = await host.run_stream(["\n ", '{"code": "1 + 1"}'], code=ToolCallCode("run_code"))
    assert ok.status == "ok" and ok.value == 2


def test_registering_a_class_says_register_an_instance() -> None:
    class Docs:
        @capability(effect=Effect.PURE, version="1")
        def search(self, query: str) -> str:
            return query

    with pytest.raises(RegistrationError) as raised:
        Host().register("docs", Docs)
    assert str(raised.value) == (
        "Docs is a class: register an instance, Docs() (the program calls the methods of one object the Host owns)"
    )
    Host().register("docs", Docs())  # what the message says works


def test_a_forgotten_await_is_caught_by_the_type_checker(tmp_path: Path) -> None:
    """``result.status`` on the coroutine: mypy names the missing ``await``."""
    snippet = tmp_path / "forgot.py"
    snippet.write_text(
        "from pysolate import Host\n\n\n"
        "async def main(host: Host) -> str:\n"
        "    result = host.run_stream(['1\\n'])\n"
        "    return result.status\n"
    )
    done = subprocess.run(
        # A cache of its own: mypy's shared one would replay an earlier run's report (and path).
        [sys.executable, "-m", "mypy", "--no-error-summary", "--cache-dir", str(tmp_path / "cache"), str(snippet)],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert (
        f'{snippet}:6: error: "Coroutine[Any, Any, RunResult]" has no attribute "status"  [attr-defined]'
        in done.stdout
    )
    assert f'{snippet}:6: note: Maybe you forgot to use "await"?' in done.stdout
