"""OpenAI Agents SDK: a real ``Agent`` and ``Runner`` with a local ``Model`` that streams a
``run_code`` call's arguments as the Responses API does (never the network).

Reads the Host declared safe (and agent tools the builder qualified) start while the model
is still streaming and are claimed; unqualified tools never run early; the run equals the
sequential run; ``Runner.run`` runs the whole code; a streamed program that is not what
the runner invokes, or a call never invoked, never runs; setups that gain nothing say so.
"""

from __future__ import annotations

import asyncio
import json
import time
import warnings
from collections.abc import AsyncIterator
from typing import Any

import pytest
from agents import (
    Agent,
    Model,
    ModelResponse,
    RunContextWrapper,
    Runner,
    Usage,
    function_tool,
    set_tracing_disabled,
)
from agents.testing import assistant_message, function_call
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
)

from pysolate import (
    Effect,
    Host,
    NotStreamingWarning,
    PysolateWarning,
    UnqualifiedToolsWarning,
    capability,
)
from pysolate.integrations.openai_agents import PysolateCodeTool
from pysolate.testing import differences, in_process_guest

pytestmark = pytest.mark.anyio

set_tracing_disabled(True)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the Agents SDK runs on asyncio only


class Script(Model):
    """Each reply calls ``run_code`` (its arguments streamed in small slices with pauses)
    or, once a tool output came back, answers. ``invoked`` overrides the code the finished
    call carries (what the runner invokes); ``fail_after`` breaks the stream after that
    many deltas. Records the tools it was offered and when each call finished streaming."""

    def __init__(self, programs: list[str], *, size: int = 7, pause: float = 0.01) -> None:
        self.programs = list(programs)
        self.size, self.pause = size, pause
        self.invoked: str | None = None
        self.fail_after: int | None = None
        self.tools_seen: list[list[Any]] = []
        self.stream_ended: list[float] = []
        self.calls = 0

    def _reply(self, input: Any, tools: list[Any]) -> Any:
        self.tools_seen.append(list(tools))
        self.calls += 1
        answered = isinstance(input, list) and any(
            isinstance(i, dict) and i.get("type") == "function_call_output" for i in input
        )
        if answered or not self.programs:
            return assistant_message("done")
        return function_call(
            "run_code", {"code": self.programs.pop(0)}, call_id=f"call_{self.calls}"
        )

    async def get_response(
        self,
        system_instructions: Any,
        input: Any,
        model_settings: Any,
        tools: Any,
        *args: Any,
        **kwargs: Any,
    ) -> ModelResponse:
        return ModelResponse(output=[self._reply(input, tools)], usage=Usage(), response_id="resp")

    async def stream_response(
        self,
        system_instructions: Any,
        input: Any,
        model_settings: Any,
        tools: Any,
        *args: Any,
        **kwargs: Any,
    ) -> AsyncIterator[Any]:
        item = self._reply(input, tools)
        n = 0
        if item.type == "function_call":
            arguments, item.arguments = item.arguments, ""
            yield ResponseOutputItemAddedEvent(
                type="response.output_item.added", item=item, output_index=0, sequence_number=0
            )
            for n, i in enumerate(range(0, len(arguments), self.size), 1):
                if self.fail_after is not None and n > self.fail_after:
                    raise RuntimeError("the connection dropped")
                await asyncio.sleep(self.pause)
                yield ResponseFunctionCallArgumentsDeltaEvent(
                    type="response.function_call_arguments.delta",
                    item_id="fc",
                    output_index=0,
                    delta=arguments[i : i + self.size],
                    sequence_number=n,
                )
            item.arguments = (
                json.dumps({"code": self.invoked}) if self.invoked is not None else arguments
            )
            self.stream_ended.append(time.monotonic())
            yield ResponseOutputItemDoneEvent(
                type="response.output_item.done", item=item, output_index=0, sequence_number=n + 1
            )
        response = Response(
            id="resp",
            created_at=0,
            model="script",
            object="response",
            output=[item],
            tool_choice="auto",
            tools=[],
            parallel_tool_calls=False,
            status="completed",
        )
        yield ResponseCompletedEvent(
            type="response.completed", response=response, sequence_number=n + 2
        )


class Docs:
    """A Host capability: a pure search, a write; records when each call started."""

    def __init__(self) -> None:
        self.started: list[tuple[str, float]] = []

    @capability(effect=Effect.PURE, version="1")
    async def search(self, query: str) -> list[str]:
        self.started.append((f"search {query}", time.monotonic()))
        await asyncio.sleep(0.05)
        return [f"{query}-1", f"{query}-2"]

    @capability(effect=Effect.WRITE, version="1")
    async def save(self, text: str) -> None:
        self.started.append((f"save {text}", time.monotonic()))


PROGRAM = 'a = docs.search("alpha")\nb = docs.search("beta")\ndocs.save(a[0] + b[0])\nprint(len(a))\n{"n": len(a + b)}\n'


async def streamed(agent: Agent[Any], prompt: str = "go", **kwargs: Any) -> Any:
    run = Runner.run_streamed(agent, prompt, **kwargs)
    async for _ in run.stream_events():
        pass
    return run


def tool_outputs(run: Any) -> list[str]:
    return [i.output for i in run.new_items if i.type == "tool_call_output_item"]


def caught_pysolate(caught: list[warnings.WarningMessage]) -> list[warnings.WarningMessage]:
    return [w for w in caught if issubclass(w.category, PysolateWarning)]


async def test_a_streamed_call_claims_early_reads_and_equals_the_sequential_run() -> None:
    docs = Docs()
    host = Host(guest_factory=in_process_guest)
    host.register("docs", docs)
    code = PysolateCodeTool(host)
    script = Script([PROGRAM])
    run = await streamed(code.agent(Agent(name="a", model=script)))
    assert json.loads(tool_outputs(run)[0]) == {"value": {"n": 4}, "stdout": "2\n"}
    assert run.final_output == "done"
    result = code.last_result
    assert result is not None and result.report.claimed == 2
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

    @function_tool
    async def lookup(name: str) -> dict[str, Any]:
        """Find a user."""
        started.append((f"lookup {name}", time.monotonic()))
        await asyncio.sleep(0.05)
        return {"name": name, "age": 36}

    @function_tool
    def note(text: str, urgent: bool = False) -> str:
        """Write a note."""
        started.append((f"note {text}", time.monotonic()))
        return f"noted {text} urgent={urgent}"

    script = Script(['u = lookup("ada")\nn = note(u["name"])\n[u, n]\n'])
    code = PysolateCodeTool(Host(guest_factory=in_process_guest), effects={"lookup": Effect.PURE})
    run = await streamed(code.agent(Agent(name="a", tools=[lookup, note], model=script)))
    assert json.loads(tool_outputs(run)[0]) == {
        "value": [{"name": "ada", "age": 36}, "noted ada urgent=False"],
        "stdout": "",
    }
    assert code.last_result is not None and code.last_result.report.claimed == 1
    assert [t.name for t in script.tools_seen[0]] == ["run_code"]
    description = script.tools_seen[0][0].description
    assert (
        "- lookup(name)  [" in description
        and "    Find a user." in description
        and "- note(text, urgent" in description
    )
    moments = dict(started)
    (stream_end,) = script.stream_ended
    assert moments["lookup ada"] < stream_end < moments["note ada"]


async def test_a_tool_that_takes_the_run_context_gets_it_and_starts_once_invoked() -> None:
    started: list[float] = []

    @function_tool
    async def greet(ctx: RunContextWrapper[dict[str, str]], name: str) -> str:
        """Greet in the user's language."""
        started.append(time.monotonic())
        return f"{ctx.context['hello']}, {name}"

    script = Script(['greet("ada")\n'])
    code = PysolateCodeTool(Host(guest_factory=in_process_guest), effects={"greet": Effect.PURE})
    run = await streamed(
        code.agent(Agent(name="a", tools=[greet], model=script)), context={"hello": "hej"}
    )
    assert json.loads(tool_outputs(run)[0]) == {"value": "hej, ada", "stdout": ""}
    assert code.last_result is not None and code.last_result.report.claimed == 1
    (stream_end,) = script.stream_ended
    assert started[0] > stream_end  # the context exists once the runner invokes run_code


async def test_runner_run_runs_the_whole_code_and_says_once_that_nothing_streamed() -> None:
    docs = Docs()
    host = Host(guest_factory=in_process_guest)
    host.register("docs", docs)
    code = PysolateCodeTool(host)
    script = Script([])
    agent = code.agent(Agent(name="a", model=script))
    results = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            script.programs.append(PROGRAM)
            run = await Runner.run(agent, "go")
            assert json.loads(tool_outputs(run)[0]) == {"value": {"n": 4}, "stdout": "2\n"}
            results.append(code.last_result)
    (warned,) = caught_pysolate(caught)
    assert warned.category is NotStreamingWarning
    text = str(warned.message)
    assert (
        "the run_code call's code arrived whole (Runner.run" in text
        and "Runner.run_streamed(code.agent(agent), ...)" in text
    )
    assert [r.report.setup_warnings for r in results] == [(text,), (text,)]
    assert results[0].report.claimed == 2  # speculation at seal still overlaps the reads


async def test_code_the_runner_invokes_differently_runs_as_invoked() -> None:
    """The stream carried one program, the finished call another: the streamed run is
    dropped unsealed (its write never ran) and the invoked code runs."""
    docs = Docs()
    host = Host(guest_factory=in_process_guest)
    host.register("docs", docs)
    code = PysolateCodeTool(host)
    script = Script(['docs.save("streamed")\n'])
    script.invoked = 'docs.save("invoked")\n'
    await streamed(code.agent(Agent(name="a", model=script)))
    assert [what for what, _ in docs.started] == ["save invoked"]
    assert code.last_result is not None and code.last_result.source == 'docs.save("invoked")\n'


async def test_a_call_the_runner_never_invokes_never_runs_and_leaves_nothing() -> None:
    docs = Docs()
    host = Host(guest_factory=in_process_guest)
    host.register("docs", docs)
    code = PysolateCodeTool(host)
    script = Script(['docs.save("x")\n' + "y = 1\n" * 20])
    script.fail_after = 3
    with pytest.raises(RuntimeError, match="connection dropped"):
        await streamed(code.agent(Agent(name="a", model=script)))
    assert code._pending == {}  # dropped by the SDK's run-end cleanup of the model
    await code.aclose()
    assert docs.started == [] and code.last_result is None
    assert code._tasks == set()


async def test_unqualified_agent_tools_are_said_once_with_the_fix() -> None:
    @function_tool
    def lookup(name: str) -> str:
        """Find a user."""
        return name.upper()

    code = PysolateCodeTool(Host(guest_factory=in_process_guest))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        script = Script(['lookup("ada")\n'])
        run = await streamed(code.agent(Agent(name="a", tools=[lookup], model=script)))
    (warned,) = caught_pysolate(caught)
    assert warned.category is UnqualifiedToolsWarning
    text = str(warned.message)
    assert text.startswith("PysolateCodeTool: none of the agent's tools (lookup) may start early")
    assert "PysolateCodeTool(effects={'lookup': Effect.PURE})" in text
    assert json.loads(tool_outputs(run)[0])["value"] == "ADA"
    assert code.last_result is not None and code.last_result.report.setup_warnings == (text,)


async def test_a_failing_program_is_reported_to_the_model_with_its_line() -> None:
    host = Host(guest_factory=in_process_guest)
    host.register("docs", Docs())
    code = PysolateCodeTool(host)
    run = await streamed(
        code.agent(Agent(name="a", model=Script(['docs.save("x")\nprint("hi")\n1 / 0\n'])))
    )
    (output,) = tool_outputs(run)
    assert (
        "line 3" in output
        and "ZeroDivisionError" in output
        and "docs.save (ok)" in output
        and "hi" in output
    )


async def test_tools_the_runner_must_wrap_stay_with_the_model() -> None:
    @function_tool(needs_approval=True)
    def delete(path: str) -> str:
        """Delete a file."""
        return path

    @function_tool
    def lookup(name: str) -> str:
        """Find a user."""
        return name

    plain = Agent(name="a", tools=[delete, lookup], model=Script([]))
    agent = PysolateCodeTool(
        Host(guest_factory=in_process_guest), effects={"lookup": Effect.PURE}
    ).agent(plain)
    assert [t.name for t in agent.tools] == ["run_code", "delete"]
    assert plain.tools == [delete, lookup]  # the plain agent is unchanged
