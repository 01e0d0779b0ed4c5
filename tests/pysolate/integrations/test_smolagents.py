"""smolagents: a real ``CodeAgent`` with a scripted model runs its code actions in Pysolate.

The agent's tools are the program's top-level functions, ``final_answer`` ends the step,
qualified tools start while the model still streams (claimed), unqualified ones never run
early, every action equals its sequential run, and the executor works from inside a
running event loop.
"""

from __future__ import annotations

import asyncio
import threading
import time
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from smolagents import CodeAgent, Model, tool
from smolagents.models import ChatMessage, ChatMessageStreamDelta, MessageRole
from smolagents.monitoring import TokenUsage

from pysolate import (
    Effect,
    GuestLimits,
    Host,
    NotStreamingWarning,
    PysolateError,
    PysolateWarning,
    RegistrationError,
    RunResult,
    UnqualifiedToolsWarning,
)
from pysolate.integrations.smolagents import CodeTail, ExecutorStatistics, PysolateExecutor
from pysolate.testing import differences, in_process_guest, in_process_session


class ScriptedModel(Model):
    """Replies from a script, streamed in small chunks with pauses (cut at stop sequences,
    as a provider does); records when each streamed reply ended."""

    def __init__(self, replies: list[str], *, chunk: int = 5, pause: float = 0.01) -> None:
        super().__init__(model_id="scripted")
        self.replies = list(replies)
        self.chunk, self.pause = chunk, pause
        self.stream_ended: list[float] = []

    def _next(self, stop_sequences: list[str] | None) -> str:
        text = self.replies.pop(0)
        for stop in stop_sequences or ():
            if stop in text:
                text = text[: text.index(stop)]
        return text

    def generate(
        self, messages: list[Any], stop_sequences: list[str] | None = None, **kwargs: Any
    ) -> ChatMessage:
        return ChatMessage(
            role=MessageRole.ASSISTANT,
            content=self._next(stop_sequences),
            token_usage=TokenUsage(1, 1),
        )

    def generate_stream(
        self, messages: list[Any], stop_sequences: list[str] | None = None, **kwargs: Any
    ) -> Iterator[ChatMessageStreamDelta]:
        text = self._next(stop_sequences)
        for i in range(0, len(text), self.chunk):
            time.sleep(self.pause)
            yield ChatMessageStreamDelta(content=text[i : i + self.chunk])
        self.stream_ended.append(time.monotonic())
        yield ChatMessageStreamDelta(content="", token_usage=TokenUsage(1, 1))


class Backend:
    """What the tools touch; records when each call started."""

    def __init__(self) -> None:
        self.notes: dict[str, str] = {}
        self.started: list[tuple[str, float]] = []
        self.lock = threading.Lock()

    def tools(self) -> list[Any]:
        @tool
        def lookup(topic: str) -> str:
            """Look up a topic in the team wiki.

            Args:
                topic: what to look up.
            """
            with self.lock:
                self.started.append((f"lookup {topic}", time.monotonic()))
            time.sleep(0.05)
            return f"{topic} is documented"

        @tool
        def save(key: str, text: str) -> str:
            """Save a note.

            Args:
                key: the note's name.
                text: what to write.
            """
            with self.lock:
                self.started.append((f"save {key}", time.monotonic()))
            self.notes[key] = text
            return "saved"

        return [lookup, save]


PROGRAM = """a = lookup("alpha")
b = lookup("beta")
save("summary", a + "; " + b)
print(a)
final_answer(len(a + b))"""


def reply(code: str, thought: str = "I will look things up.") -> str:
    return f"Thought: {thought}\n<code>\n{code}\n</code>\nObservation: (never reached)"


def in_process_host() -> Host:
    return Host(guest_factory=in_process_guest, session_factory=in_process_session)


class RecordingExecutor(PysolateExecutor):
    """Keeps every action's RunResult."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.results: list[RunResult] = []

    def __call__(self, code_action: str) -> Any:
        try:
            return super().__call__(code_action)
        finally:
            assert self.last_result is not None
            self.results.append(self.last_result)


def make_agent(
    replies: list[str],
    *,
    effects: dict[str, Effect] | None = None,
    stream: bool = True,
    host: Host | None = None,
    **kwargs: Any,
) -> tuple[CodeAgent, RecordingExecutor, ScriptedModel, Backend]:
    backend = Backend()
    model = ScriptedModel(replies)
    executor = RecordingExecutor(host or in_process_host(), effects=effects, **kwargs)
    agent = CodeAgent(
        tools=backend.tools(),
        model=executor.streaming(model) if stream else model,
        executor=executor,
        stream_outputs=stream,
        max_steps=3,
        verbosity_level=0,
    )
    return agent, executor, model, backend


def test_streamed_code_action_claims_qualified_reads_and_equals_the_sequential_run() -> None:
    """lookup (qualified PURE) runs twice while the model streams and both calls claim;
    save (unqualified) runs only after; the result is the sequential run's."""
    agent, executor, model, backend = make_agent([reply(PROGRAM)], effects={"lookup": Effect.PURE})
    try:
        assert agent.run("Summarise alpha and beta") == len(
            "alpha is documented" + "beta is documented"
        )
        result = executor.last_result
        assert result is not None
        assert result.report.claimed == 2
        assert [c.method for c in result.calls] == ["lookup", "lookup", "save", "final_answer"]
        assert backend.notes == {"summary": "alpha is documented; beta is documented"}
        started = dict(backend.started)
        (stream_end,) = model.stream_ended
        assert started["lookup alpha"] < stream_end and started["lookup beta"] < stream_end
        assert started["save summary"] > stream_end
        assert executor.statistics() == ExecutorStatistics(sealed=1, dropped=0, whole=0)
    finally:
        agent.cleanup()

    reference_agent, reference, _, reference_backend = make_agent([reply(PROGRAM)], speculate=False)
    try:
        reference_agent.run("Summarise alpha and beta")
        assert reference.last_result is not None and reference.last_result.report.claimed == 0
        assert differences(result, reference.last_result) == []
        assert reference_backend.notes == backend.notes
    finally:
        reference_agent.cleanup()


def test_unqualified_tools_never_run_early() -> None:
    agent, executor, model, backend = make_agent([reply(PROGRAM)])
    try:
        agent.run("Summarise alpha and beta")
        assert executor.last_result is not None and executor.last_result.report.claimed == 0
        (stream_end,) = model.stream_ended
        assert all(at > stream_end for _, at in backend.started)
    finally:
        agent.cleanup()


def test_final_answer_ends_the_action() -> None:
    """Nothing after final_answer(...) runs; the step's output is the answer."""
    agent, executor, _, backend = make_agent([reply('final_answer("done")\nsave("after", "x")')])
    try:
        assert agent.run("finish") == "done"
        assert backend.notes == {}
        assert executor.last_result is not None
        assert [c.method for c in executor.last_result.calls] == ["final_answer"]
    finally:
        agent.cleanup()


def test_final_answer_caught_by_the_program_still_ends_the_step() -> None:
    """A program that catches what final_answer raises goes on (a Host cannot raise a
    BaseException in the Guest), but the step ends with the first answer."""
    code = 'try:\n    final_answer("first")\nexcept Exception as e:\n    print(type(e).__name__)\nfinal_answer("second")'
    agent, executor, _, _ = make_agent([reply(code)])
    try:
        assert agent.run("finish") == "first"
        assert executor.last_result is not None and executor.last_result.stdout == "ToolError\n"
    finally:
        agent.cleanup()


def test_an_error_becomes_the_observation_and_the_agent_recovers() -> None:
    failing = 'print("before")\nx = lookup("alpha")\n1 / 0'
    agent, _, _, _ = make_agent([reply(failing), reply('final_answer("recovered")')])
    try:
        assert agent.run("try") == "recovered"
        step = agent.memory.steps[1]
        assert step.error is not None
        message = str(step.error)
        assert "ZeroDivisionError" in message and "line 3" in message
        assert "before" in (step.observations or "")
    finally:
        agent.cleanup()


def test_a_syntax_error_is_rejected_with_nothing_run() -> None:
    agent, _, _, backend = make_agent(
        [reply('save("k", "v")\nif True\n    pass'), reply("final_answer(1)")]
    )
    try:
        assert agent.run("try") == 1
        assert "SyntaxError" in str(agent.memory.steps[1].error)
        assert backend.notes == {}
    finally:
        agent.cleanup()


def test_code_the_agent_rewrites_runs_as_rewritten() -> None:
    """smolagents rewrites ``final_answer = ...`` (fix_final_answer_code): the streamed text is
    then not a prefix of the parsed code, so that code runs from scratch, and only it."""
    code = 'final_answer = lookup("alpha")\nfinal_answer(final_answer)'
    agent, executor, _, _ = make_agent([reply(code)], effects={"lookup": Effect.PURE})
    try:
        assert agent.run("go") == "alpha is documented"
        assert executor.last_result is not None
        assert [c.method for c in executor.last_result.calls] == ["lookup", "final_answer"]
        assert executor.last_result.calls[0].args == ("alpha",)
        assert executor.statistics() == ExecutorStatistics(sealed=0, dropped=1, whole=1)
    finally:
        agent.cleanup()


def test_without_streaming_the_code_still_runs_in_pysolate() -> None:
    agent, executor, _, _ = make_agent(
        [reply(PROGRAM)], effects={"lookup": Effect.PURE}, stream=False
    )
    try:
        assert agent.run("go") == len("alpha is documented" + "beta is documented")
        assert executor.last_result is not None and executor.last_result.report.logical == 4
        assert executor.statistics() == ExecutorStatistics(sealed=0, dropped=0, whole=1)
    finally:
        agent.cleanup()


def test_an_agent_that_does_not_stream_through_the_executor_is_said_once() -> None:
    """Without streamed outputs each action arrives whole: one ``NotStreamingWarning``
    naming the fix over two actions, and both actions' reports carry its text."""
    replies = [reply('x = lookup("alpha")\nprint(x)'), reply("final_answer(x)")]
    agent, executor, _, _ = make_agent(replies, effects={"lookup": Effect.PURE}, stream=False)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert agent.run("go") == "alpha is documented"
    finally:
        agent.cleanup()
    (warned,) = [w for w in caught if issubclass(w.category, PysolateWarning)]
    assert warned.category is NotStreamingWarning
    text = str(warned.message)
    assert "the code action arrived whole" in text
    assert "model=executor.streaming(model), executor=executor, stream_outputs=True" in text
    assert [r.report.setup_warnings for r in executor.results] == [(text,), (text,)]


def test_tools_effects_names_none_of_are_said_once_with_the_fix() -> None:
    """No tool named in ``effects`` (final_answer aside): one ``UnqualifiedToolsWarning``
    naming them and the fix — not also the Host's about the same tools; naming each tool,
    even with an effect that never starts early, is a decision and silences both."""
    agent, executor, _, _ = make_agent([reply(PROGRAM)])
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            agent.run("go")
    finally:
        agent.cleanup()
    (warned,) = [w for w in caught if issubclass(w.category, PysolateWarning)]
    assert warned.category is UnqualifiedToolsWarning
    text = str(warned.message)
    assert text.startswith(
        "PysolateExecutor: none of the agent's tools (lookup, save) may start early"
    )
    assert "PysolateExecutor(effects={'lookup': Effect.PURE})" in text
    assert executor.last_result is not None and executor.last_result.report.setup_warnings == (
        text,
    )

    agent, executor, _, _ = make_agent(
        [reply(PROGRAM)], effects={"save": Effect.WRITE, "lookup": Effect.LIVE_READ}
    )
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            agent.run("go")
    finally:
        agent.cleanup()
    assert [w for w in caught if issubclass(w.category, PysolateWarning)] == []
    assert executor.last_result is not None and executor.last_result.report.setup_warnings == ()


def test_works_from_inside_a_running_event_loop() -> None:
    """A sync agent called from async code (a notebook, a web handler) blocks that loop but
    runs: the executor has its own loop thread."""

    async def main() -> object:
        agent, _, _, _ = make_agent([reply(PROGRAM)], effects={"lookup": Effect.PURE})
        try:
            return agent.run("go")
        finally:
            agent.cleanup()

    assert asyncio.run(main()) == len("alpha is documented" + "beta is documented")


def test_default_host_runs_the_isolated_guest() -> None:
    backend = Backend()
    model = ScriptedModel([reply(PROGRAM)])
    executor = PysolateExecutor(effects={"lookup": Effect.PURE})
    agent = CodeAgent(
        tools=backend.tools(),
        model=executor.streaming(model),
        executor=executor,
        stream_outputs=True,
        verbosity_level=0,
    )
    try:
        assert agent.run("go") == len("alpha is documented" + "beta is documented")
        assert executor.last_result is not None
        assert (
            executor.last_result.isolation is not None
            and executor.last_result.isolation.level != "in_process"
        )
        assert executor.last_result.report.claimed == 2
    finally:
        agent.cleanup()


def test_misuse_is_refused_clearly() -> None:
    agent = make_agent([reply("1")], effects={"serach": Effect.PURE})[0]
    with pytest.raises(RegistrationError, match="does not have: serach"):
        agent.run("a typo in effects is not silently ignored")
    agent.cleanup()
    executor = PysolateExecutor(in_process_host(), keep_state=False)
    with pytest.raises(PysolateError, match="keep_state"):
        executor.send_variables({"x": 1})
    executor.send_variables({})
    agent = make_agent([reply("1")], effects={"lookup": Effect.PURE})[0]
    with pytest.raises(PysolateError, match="'when' is not plain data"):
        agent.run("go", additional_args={"when": object()})
    agent.cleanup()


def test_variables_persist_across_actions_and_equal_the_sequential_session() -> None:
    """Like smolagents' own executor, an action sees what earlier ones assigned; each
    action equals the same turn of a session run sequentially."""
    steps = [
        reply('pages = [lookup(t) for t in ["alpha", "beta"]]\nprint(len(pages))'),
        reply("final_answer(pages[1])"),
    ]
    agent, executor, _, _ = make_agent(list(steps), effects={"lookup": Effect.PURE})
    reference_agent, reference, _, _ = make_agent(list(steps), speculate=False)
    try:
        assert agent.run("go") == reference_agent.run("go") == "beta is documented"
        assert len(executor.results) == len(reference.results) == 2
        for fast, slow in zip(executor.results, reference.results, strict=True):
            assert differences(fast, slow) == []
        assert executor.results[0].report.claimed == 2
    finally:
        agent.cleanup()
        reference_agent.cleanup()


def test_additional_args_are_globals_and_speculation_knows_them() -> None:
    """``additional_args`` become plain-data globals; the loop over them starts its reads
    while the model streams (the session knows the globals earlier turns left)."""
    code = "found = [lookup(t) for t in topics]\nfinal_answer(len(found))"
    agent, executor, _, _ = make_agent([reply(code)], effects={"lookup": Effect.PURE})
    try:
        assert agent.run("go", additional_args={"topics": ["alpha", "beta", "gamma"]}) == 3
        assert executor.results[-1].report.claimed == 3
    finally:
        agent.cleanup()


def test_without_keep_state_each_action_starts_fresh() -> None:
    steps = [reply("x = 1"), reply("final_answer(x)"), reply("final_answer(2)")]
    agent, _, _, _ = make_agent(steps, keep_state=False)
    try:
        assert agent.run("go") == 2
        assert "NameError" in str(agent.memory.steps[2].error)
    finally:
        agent.cleanup()


def test_an_action_that_stops_the_guest_says_the_variables_are_gone() -> None:
    """A CPU limit stops the session's Guest mid-turn: that action's error says the state
    is lost (nothing is replayed behind the model's back) and the next action runs in a new
    session."""
    steps = [
        reply("x = 1"),
        reply("while True:\n    pass"),
        reply("final_answer(x)"),
        reply("final_answer(3)"),
    ]
    host = Host(limits=GuestLimits(cpu_time=1.0))
    agent, _, _, _ = make_agent(steps, host=host, stream=False)
    agent.max_steps = 4
    try:
        assert agent.run("go") == 3
        assert "variables from earlier steps are gone" in str(agent.memory.steps[2].error)
        assert "NameError" in str(agent.memory.steps[3].error)
    finally:
        agent.cleanup()


CODE = 'x = lookup("a")\nif x:\n    print(x)  \n\nfinal_answer(x)'


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(min_value=1, max_value=12), min_size=1, max_size=40),
    st.sampled_from(["\n", "  \n\t", ""]),
)
def test_code_tail_forwards_only_a_prefix_of_what_smolagents_parses(
    cuts: list[int], lead: str
) -> None:
    """Whatever the chunking, the code forwarded is a prefix of the parsed code (so the
    executor can seal it), and all of it once the closing tag has streamed."""
    from smolagents.utils import parse_code_blobs

    text = f"Thought: go\n<code>{lead}{CODE}\n</code>"
    tail, forwarded, at = CodeTail(), "", 0
    for cut in cuts:
        forwarded += tail.feed(text[at : at + cut])
        at += cut
    forwarded += tail.feed(text[at:])
    parsed = parse_code_blobs(text, ("<code>", "</code>"))
    assert forwarded == parsed
    tail, forwarded = CodeTail(), ""
    for i in range(0, len(text) - len("</code>"), 3):
        forwarded += tail.feed(text[i : min(i + 3, len(text) - len("</code>"))])
        assert parsed.startswith(forwarded)
