"""Pydantic AI: a real ``Agent`` with a ``FunctionModel`` that streams a ``run_code`` call.

Reads the Host declared safe (and agent tools the builder qualified) start while the
model is still streaming the tool call's JSON arguments and are claimed; unqualified tools
never run early; the tool's return value is the run's value and output, equal to the
sequential run; a failing program becomes a ``ModelRetry`` the model sees.
"""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
from pydantic_ai.models.test import TestModel

from pysolate import (
    Effect,
    Host,
    NotStreamingWarning,
    PysolateWarning,
    RegistrationError,
    RunResult,
    UnqualifiedToolsWarning,
    capability,
)
from pysolate.integrations.pydantic_ai import PysolateCodeMode
from pysolate.testing import differences, in_process_guest
from pysolate.tracing import OTelInstrument

pytestmark = pytest.mark.anyio


class Docs:
    """A Host capability: a pure search, a write; records when each call started."""

    def __init__(self) -> None:
        self.started: list[tuple[str, float]] = []
        self.saved: list[str] = []

    @capability(effect=Effect.PURE, version="1")
    async def search(self, query: str) -> list[str]:
        self.started.append((f"search {query}", time.monotonic()))
        await anyio.sleep(0.05)
        return [f"{query}-1", f"{query}-2"]

    @capability(effect=Effect.WRITE, version="1")
    async def save(self, text: str) -> None:
        self.started.append((f"save {text}", time.monotonic()))
        self.saved.append(text)


class Script:
    """A FunctionModel stream function: each reply either calls ``run_code`` (its JSON
    arguments streamed in small slices with pauses) or answers with text; remembers what
    it saw and when each tool call finished streaming."""

    def __init__(self, programs: list[str], *, size: int = 7, pause: float = 0.01) -> None:
        self.programs = list(programs)
        self.size, self.pause = size, pause
        self.requests: list[list[ModelMessage]] = []
        self.tools_seen: list[list[Any]] = []
        self.stream_ended: list[float] = []

    async def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        self.requests.append(list(messages))
        self.tools_seen.append(list(info.function_tools))
        if not self.programs:
            yield "done"
            return
        arguments = json.dumps({"code": self.programs.pop(0)})
        yield {0: DeltaToolCall(name="run_code", tool_call_id=f"call_{len(self.requests)}")}
        for i in range(0, len(arguments), self.size):
            await anyio.sleep(self.pause)
            yield {0: DeltaToolCall(json_args=arguments[i : i + self.size])}
        self.stream_ended.append(time.monotonic())

    def whole(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        """The same replies, not streamed (``FunctionModel(function=...)``)."""
        self.requests.append(list(messages))
        self.tools_seen.append(list(info.function_tools))
        if not self.programs:
            return ModelResponse(parts=[TextPart("done")])
        arguments = json.dumps({"code": self.programs.pop(0)})
        return ModelResponse(
            parts=[ToolCallPart("run_code", arguments, tool_call_id=f"call_{len(self.requests)}")]
        )


def tool_returns(messages: list[ModelMessage], outcome: str = "success") -> list[ToolReturnPart]:
    """The tool results the model was sent (a ``ModelRetry`` is one with outcome ``retried``)."""
    return [
        p
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart) and p.outcome == outcome
    ]


class User(BaseModel):
    name: str
    age: int


PROGRAM = 'a = docs.search("alpha")\nb = docs.search("beta")\ndocs.save(a[0] + b[0])\nprint(len(a))\n{"n": len(a + b)}\n'


async def test_streamed_tool_call_claims_early_reads_and_equals_the_sequential_run() -> None:
    docs = Docs()
    host = Host(guest_factory=in_process_guest)
    host.register("docs", docs)
    script = Script([PROGRAM])
    agent = Agent(FunctionModel(stream_function=script), capabilities=[PysolateCodeMode(host)])
    run = await agent.run("search alpha and beta")
    (returned,) = tool_returns(run.all_messages())
    assert returned.content == {"value": {"n": 4}, "stdout": "2\n"}
    result = returned.metadata
    assert isinstance(result, RunResult) and result.report.claimed == 2
    started = dict(docs.started)
    (stream_end,) = script.stream_ended
    assert started["search alpha"] < stream_end and started["search beta"] < stream_end
    assert started["save alpha-1beta-1"] > stream_end

    reference_host = Host(guest_factory=in_process_guest)
    reference_host.register("docs", Docs())
    reference = await reference_host.run_source(PROGRAM, speculate=False)
    assert differences(result, reference) == []


async def test_agent_tools_are_program_functions_and_only_qualified_ones_start_early() -> None:
    started: list[tuple[str, float]] = []
    script = Script(['u = lookup("ada")\nn = note(u["name"])\n[u, n]\n'])
    agent = Agent(
        FunctionModel(stream_function=script),
        capabilities=[
            PysolateCodeMode(Host(guest_factory=in_process_guest), effects={"lookup": Effect.PURE})
        ],
    )

    @agent.tool_plain
    async def lookup(name: str) -> User:
        """Find a user."""
        started.append((f"lookup {name}", time.monotonic()))
        await anyio.sleep(0.05)
        return User(name=name, age=36)

    @agent.tool_plain
    def note(text: str, urgent: bool = False) -> str:
        """Write a note."""
        started.append((f"note {text}", time.monotonic()))
        return f"noted {text} urgent={urgent}"

    run = await agent.run("who is ada?")
    (returned,) = tool_returns(run.all_messages())
    assert returned.content == {
        "value": [{"name": "ada", "age": 36}, "noted ada urgent=False"],
        "stdout": "",
    }
    assert returned.metadata.report.claimed == 1
    assert [t.name for t in script.tools_seen[0]] == ["run_code"]
    description = script.tools_seen[0][0].description
    assert "lookup(name)" in description and "note(text, urgent=False)" in description
    moments = dict(started)
    (stream_end,) = script.stream_ended
    assert moments["lookup ada"] < stream_end < moments["note ada"]


async def test_a_failing_program_is_a_model_retry_naming_the_line() -> None:
    docs = Docs()
    host = Host(guest_factory=in_process_guest)
    host.register("docs", docs)
    script = Script(['docs.save("x")\nprint("hi")\n1 / 0\n', "docs.search('ok')\n"])
    agent = Agent(FunctionModel(stream_function=script), capabilities=[PysolateCodeMode(host)])
    run = await agent.run("go")
    (retry,) = tool_returns(run.all_messages(), "retried")
    assert "line 3" in str(retry.content) and "ZeroDivisionError" in str(retry.content)
    assert "docs.save (ok)" in str(retry.content) and "hi" in str(retry.content)
    (returned,) = tool_returns(run.all_messages())
    assert returned.content == {"value": ["ok-1", "ok-2"], "stdout": ""}


async def test_a_syntax_error_is_rejected_and_nothing_runs() -> None:
    docs = Docs()
    host = Host(guest_factory=in_process_guest)
    host.register("docs", docs)
    script = Script(['docs.save("x")\nif True\n', "1\n"])
    agent = Agent(FunctionModel(stream_function=script), capabilities=[PysolateCodeMode(host)])
    run = await agent.run("go")
    retries = tool_returns(run.all_messages(), "retried")
    assert len(retries) == 1 and "rejected" in str(retries[0].content)
    assert docs.saved == []


async def test_without_streaming_the_code_still_runs() -> None:
    """``stream=False``: the agent makes plain requests (the model need not stream), each
    program runs whole, and nothing is warned (whole programs are what was asked for)."""
    docs = Docs()
    host = Host(guest_factory=in_process_guest)
    host.register("docs", docs)
    script = Script([PROGRAM])
    agent = Agent(
        FunctionModel(function=script.whole), capabilities=[PysolateCodeMode(host, stream=False)]
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = await agent.run("go")
    (returned,) = tool_returns(run.all_messages())
    assert returned.content == {"value": {"n": 4}, "stdout": "2\n"}
    assert returned.metadata.report.claimed == 2  # speculation at seal still overlaps the reads
    assert returned.metadata.report.setup_warnings == ()
    assert [w for w in caught if issubclass(w.category, PysolateWarning)] == []


async def test_a_model_that_cannot_stream_runs_each_program_whole_and_says_so_once() -> None:
    """``FunctionModel(function=...)`` (no ``stream_function``): the capability does not make
    the run stream, so the model is asked plainly; the code runs whole and equals the
    sequential run; the setup is warned about once, and every run's report says it."""
    docs = Docs()
    host = Host(guest_factory=in_process_guest)
    host.register("docs", docs)
    script = Script([])
    agent = Agent(FunctionModel(function=script.whole), capabilities=[PysolateCodeMode(host)])
    runs = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for prompt in ("go", "again"):
            script.programs.append(PROGRAM)
            runs.append(await agent.run(prompt))
    (warned,) = [w for w in caught if issubclass(w.category, PysolateWarning)]
    assert warned.category is NotStreamingWarning
    text = str(warned.message)
    assert (
        "run_code call's code arrived whole (the model cannot stream: FunctionModel(function=...)"
        in text
    )
    assert "FunctionModel(stream_function=...)" in text and "PysolateCodeMode(stream=False)" in text
    for run in runs:
        (returned,) = tool_returns(run.all_messages())
        assert returned.content == {"value": {"n": 4}, "stdout": "2\n"}
        assert returned.metadata.report.setup_warnings == (text,)
    reference_host = Host(guest_factory=in_process_guest)
    reference_host.register("docs", Docs())
    reference = await reference_host.run_source(PROGRAM, speculate=False)
    assert differences(tool_returns(runs[0].all_messages())[0].metadata, reference) == []


async def test_test_model_runs_the_example_program() -> None:
    """``TestModel`` writes the ``code`` argument from the parameter's ``examples``: a
    valid program, so the run ends ``ok`` instead of exhausting the retries on ``'a'``."""
    agent = Agent(
        TestModel(), capabilities=[PysolateCodeMode(Host(guest_factory=in_process_guest))]
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = await agent.run("go")
    (returned,) = tool_returns(run.all_messages())
    assert returned.content == {"value": 45, "stdout": "45\n"}
    (warned,) = [w for w in caught if issubclass(w.category, PysolateWarning)]
    assert "sent the arguments as one object, as TestModel does" in str(warned.message)


async def test_unqualified_agent_tools_are_said_once_with_the_fix() -> None:
    """An agent whose tools ``effects`` names none of: one ``UnqualifiedToolsWarning`` per
    setup naming the tools and the fix (not a second one from the Host about the same
    tools), over two runs; both runs' reports carry it."""
    script = Script([])
    agent = Agent(
        FunctionModel(stream_function=script),
        capabilities=[PysolateCodeMode(Host(guest_factory=in_process_guest))],
    )

    @agent.tool_plain
    def lookup(name: str) -> str:
        """Find a user."""
        return name.upper()

    runs = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for name in ("ada", "bob"):
            script.programs.append(f"lookup({name!r})\n")
            runs.append(await agent.run(name))
    (warned,) = [w for w in caught if issubclass(w.category, PysolateWarning)]
    assert warned.category is UnqualifiedToolsWarning
    text = str(warned.message)
    assert text.startswith("PysolateCodeMode: none of the agent's tools (lookup) may start early")
    assert "PysolateCodeMode(effects={'lookup': Effect.PURE})" in text
    assert [tool_returns(r.all_messages())[0].metadata.report.setup_warnings for r in runs] == [
        (text,),
        (text,),
    ]


async def test_a_typo_in_effects_is_refused() -> None:
    script = Script(["1\n"])
    agent = Agent(
        FunctionModel(stream_function=script),
        capabilities=[
            PysolateCodeMode(Host(guest_factory=in_process_guest), effects={"lookpu": Effect.PURE})
        ],
    )

    @agent.tool_plain
    def lookup(name: str) -> str:
        return name

    with pytest.raises(RegistrationError, match="lookpu"):
        await agent.run("go")


async def test_the_run_span_records_the_tool_call_and_conversation() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    host = Host(guest_factory=in_process_guest, instrument=OTelInstrument(tracer_provider=provider))
    host.register("docs", Docs())
    agent = Agent(
        FunctionModel(stream_function=Script([PROGRAM])), capabilities=[PysolateCodeMode(host)]
    )
    run = await agent.run("go")
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "pysolate.run"]
    assert span.attributes is not None
    assert span.attributes["gen_ai.tool.call.id"] == "call_1"
    assert span.attributes["gen_ai.conversation.id"] == run.conversation_id
    provider.shutdown()
