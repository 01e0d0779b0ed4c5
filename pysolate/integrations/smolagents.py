"""smolagents: a ``PythonExecutor`` for ``CodeAgent`` that runs each code action in Pysolate.

::

    executor = PysolateExecutor(effects={"lookup": Effect.PURE})
    agent = CodeAgent(tools=[lookup, save], model=executor.streaming(model),
                      executor=executor, stream_outputs=True)

The agent's tools become the program's top-level functions (``lookup(...)``), registered on
the executor's Host; ``final_answer(...)`` ends the step with its answer, as in smolagents.
A tool is ``unknown`` — never run early — unless ``effects`` qualifies it by name.

Streaming. smolagents streams model output only for display (``stream_outputs=True``) and
parses the code once the reply is complete. ``executor.streaming(model)`` wraps the model so
that its ``generate_stream`` deltas also feed a Pysolate run: the code after the opening tag
(``<code>`` by default) streams into the prefix parser while the model is still writing,
so qualified reads start early and the Guest starts meanwhile. The run is sealed only when
the agent hands the parsed code to the executor, and only if the streamed text is a prefix
of exactly that code (the rest is appended): the program that runs is always the one
smolagents parsed (after its own ``fix_final_answer_code``). When they differ (a second
code block, a rewrite) the streamed run is aborted — nothing of it ran in a Guest, only
early reads are wasted — and the code runs from scratch.

smolagents is synchronous; Pysolate is async. The executor runs its own event loop in a
background thread (an anyio blocking portal), so it works the same from plain code and
from inside a running event loop (a notebook, an async web handler), where ``anyio.run``
would fail. ``cleanup()`` (called by ``CodeAgent.cleanup``) stops that thread.

Not (yet) supported: variables across steps (each code action runs in a fresh Guest, so
``send_variables`` with values raises), and tool results that are not plain data.
"""

from __future__ import annotations

import concurrent.futures
import inspect
import math
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.from_thread
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from smolagents.local_python_executor import CodeOutput, InterpreterError, PythonExecutor

from .. import Host, PysolateError, RegistrationError, RunResult, RunStatus
from ._common import (
    CONFIRM,
    SUPERSEDE,
    Qualification,
    check_function_name,
    failure_message,
    qualifications,
    tool_function,
    until_confirmed,
)

__all__ = ["CodeTail", "ExecutorStatistics", "FinalAnswer", "PysolateExecutor", "StreamingModel"]

DEFAULT_CODE_BLOCK_TAGS = ("<code>", "</code>")
"""CodeAgent's default ``code_block_tags`` (regular expressions, as smolagents reads them)."""



class FinalAnswer(Exception):
    """Raised in the program by ``final_answer(...)`` so nothing after it runs.

    The program sees it as ``ToolError('FinalAnswer: ...')`` (a Host cannot raise a
    ``BaseException`` in the Guest); the step ends with the answer even if the program
    catches it, as smolagents' own ``FinalAnswerException`` would have ended it.
    """


class CodeTail:
    """The code of a streamed smolagents reply, as far as it is final, chunk by chunk.

    ``feed(text)`` returns the new code to forward: the text after the first match of the
    opening tag, leading whitespace skipped, up to the closing tag. It forwards only up to
    the last newline seen, and holds trailing whitespace back, because smolagents strips
    the block (``match.strip()``) and a partly streamed closing tag must never be taken for
    code. A wrong guess is harmless (the executor checks the prefix), so this is a plain
    best effort with no state beyond the text.
    """

    def __init__(self, code_block_tags: tuple[str, str] = DEFAULT_CODE_BLOCK_TAGS) -> None:
        self._opening = re.compile(code_block_tags[0])
        self._closing = re.compile(code_block_tags[1])
        self._text = ""
        self._start: int | None = None  # where the code starts in _text, once found
        self._sent = 0  # characters of code already returned
        self._closed = False

    def feed(self, text: str) -> str:
        """Append ``text`` of the reply; return the code that became final."""
        self._text += text
        if self._closed:
            return ""
        if self._start is None:
            found = self._opening.search(self._text)
            # The match must be followed by a character, so "```py" is not taken for "```python".
            if found is None or found.end() == len(self._text):
                return ""
            self._start = found.end()
        stripped = self._text[self._start :].lstrip()
        closing = self._closing.search(stripped)
        if closing is not None:
            stripped, self._closed = stripped[: closing.start()], True
        else:
            newline = stripped.rfind("\n")
            stripped = stripped[:newline] if newline >= 0 else ""
        final = stripped.rstrip()
        new, self._sent = final[self._sent :], max(self._sent, len(final))
        return new


@dataclass(frozen=True, slots=True)
class ExecutorStatistics:
    """``PysolateExecutor.statistics()``: code actions by how they ran."""

    sealed: int
    """Runs fed from the model's stream and sealed with the parsed code."""
    dropped: int
    """Streamed runs aborted because the parsed code differed (those actions ran whole)."""
    whole: int
    """Actions run from the complete code (no stream, or a dropped one)."""


@dataclass(slots=True, eq=False)
class _StreamedRun:
    """A run fed from the model's stream, waiting for the agent's parsed code to seal it."""

    send: MemoryObjectSendStream[str | bool]
    result: concurrent.futures.Future[RunResult]
    tail: CodeTail
    fed: list[str] = field(default_factory=list)  # the code chunks sent, in order


class PysolateExecutor(PythonExecutor):
    """A ``CodeAgent`` executor that runs each code action as a Pysolate program.

    ``host`` (default: a new ``Host()``) is where the agent's tools are registered, next to
    any capabilities the builder registered on it (so one executor per Host). ``effects``
    qualifies tools by name (``Effect`` or ``MethodSpec``); all others are ``unknown``.
    ``speculate=False`` runs each action sequentially (the reference). After each action
    ``last_result`` holds the full ``RunResult`` (receipts, report, timeline).

    ``__call__`` raises smolagents' ``InterpreterError`` when the program raises, is
    rejected or aborted, with the line and what the program printed (``state
    ["_print_outputs"]``), which ``CodeAgent`` turns into an error observation.
    """

    def __init__(
        self,
        host: Host | None = None,
        *,
        effects: Mapping[str, Qualification] | None = None,
        speculate: bool = True,
    ) -> None:
        self.host = host if host is not None else Host()
        self.speculate = speculate
        self.state: dict[str, Any] = {}
        self.last_result: RunResult | None = None
        self._effects = dict(effects or {})
        self._tools: dict[str, object] = {}  # what this executor registered, by name
        self._answers: list[object] = []  # final_answer(...) values of the current action
        self._loop: _LoopThread | None = None
        self._streamed: _StreamedRun | None = None  # at most one: the current step's
        self._counts = {"sealed": 0, "dropped": 0, "whole": 0}

    # -- PythonExecutor -------------------------------------------------------------------

    def send_tools(self, tools: Mapping[str, Any]) -> None:
        """Register the agent's tools as top-level functions (again on every ``agent.run``:
        a tool already registered is kept; another tool under a taken name raises
        ``RegistrationError``)."""
        specs = qualifications(self._effects, list(tools))
        for name, tool in tools.items():
            known = self._tools.get(name)
            if known is tool:
                continue
            if known is not None:
                raise RegistrationError(f"the executor already has a different tool named {name!r}")
            check_function_name(name, "tool")
            if name == "final_answer":
                function = tool_function(
                    name, self._final_answer(tool), _signature(tool), specs[name], is_async=False
                )
            else:
                function = tool_function(name, _caller(tool), _signature(tool), specs[name], is_async=False)
            self.host.register(name, function)
            self._tools[name] = tool

    def send_variables(self, variables: Mapping[str, Any]) -> None:
        """Variables across steps are not supported yet: raise ``PysolateError`` if any."""
        if variables:
            raise PysolateError(
                "PysolateExecutor runs each code action in a fresh Guest: variables "
                f"({', '.join(sorted(variables))}) cannot be sent yet; pass them in the task text"
            )

    def __call__(self, code_action: str) -> CodeOutput:
        """Run ``code_action`` (sealing the streamed run when the stream was its prefix)."""
        portal = self._ensure_portal()
        streamed, self._streamed = self._streamed, None
        self._answers = []
        self.state["_print_outputs"] = ""
        fed = "".join(streamed.fed) if streamed is not None else ""
        if streamed is not None and not streamed.result.done() and code_action.startswith(fed):
            rest = code_action[len(fed) :]
            if rest:
                portal.call(streamed.send.send_nowait, rest)
            portal.call(streamed.send.send_nowait, CONFIRM)
            result = streamed.result.result()
            self._counts["sealed"] += 1
        else:
            if streamed is not None:
                self._abandon(streamed)
                self._counts["dropped"] += 1
            result = portal.call(self._run_source, code_action)
            self._counts["whole"] += 1
        self.last_result = result
        return self._code_output(result)

    def statistics(self) -> ExecutorStatistics:
        """How the code actions so far ran: sealed from the model's stream, or whole
        (``dropped`` of those had streamed text that was not a prefix of the parsed code)."""
        return ExecutorStatistics(**self._counts)

    def cleanup(self) -> None:
        """Abort a streamed run still open and stop the executor's event-loop thread."""
        if self._streamed is not None:
            self._abandon(self._streamed)
            self._streamed = None
        if self._loop is not None:
            loop, self._loop = self._loop, None
            loop.stop()

    # -- streaming ------------------------------------------------------------------------

    def streaming(self, model: Any, *, code_block_tags: tuple[str, str] | None = None) -> StreamingModel:
        """``model`` wrapped so that its streamed output feeds this executor (pass the
        agent's ``code_block_tags`` when they are not CodeAgent's default)."""
        return StreamingModel(model, self, code_block_tags=code_block_tags or DEFAULT_CODE_BLOCK_TAGS)

    def open_stream(self, code_block_tags: tuple[str, str] = DEFAULT_CODE_BLOCK_TAGS) -> Callable[[str], None]:
        """Start a streamed run for the step now being generated; return the feed function
        that takes the model's text deltas. A previous step's unsealed run is aborted."""
        portal = self._ensure_portal()
        if self._streamed is not None:
            self._abandon(self._streamed)
        send, receive = anyio.create_memory_object_stream[str | bool](math.inf)
        future = portal.start_task_soon(self._run_streamed, receive)
        streamed = self._streamed = _StreamedRun(send, future, CodeTail(code_block_tags))

        def feed(text: str) -> None:
            code = streamed.tail.feed(text)
            if code and self._streamed is streamed:
                streamed.fed.append(code)
                portal.call(streamed.send.send_nowait, code)

        return feed

    async def _run_streamed(self, receive: MemoryObjectReceiveStream[str | bool]) -> RunResult:
        return await self.host.run_stream(until_confirmed(receive), speculate=self.speculate)

    async def _run_source(self, source: str) -> RunResult:
        return await self.host.run_source(source, speculate=self.speculate)

    def _abandon(self, streamed: _StreamedRun) -> None:
        """Abort an unsealed streamed run and wait until its early work is stopped."""
        if self._loop is not None and not streamed.result.done():
            self._loop.portal.call(streamed.send.send_nowait, SUPERSEDE)
        concurrent.futures.wait([streamed.result])

    def _ensure_portal(self) -> anyio.from_thread.BlockingPortal:
        if self._loop is None:
            self._loop = _LoopThread()
        return self._loop.portal

    # -- results --------------------------------------------------------------------------

    def _final_answer(self, tool: Any) -> Callable[..., Any]:
        def final_answer(*args: Any, **kwargs: Any) -> Any:
            self._answers.append(tool(*args, **kwargs))
            raise FinalAnswer("final_answer() ends the code action")

        return final_answer

    def _code_output(self, result: RunResult) -> CodeOutput:
        self.state["_print_outputs"] = result.stdout
        if self._answers:
            return CodeOutput(output=self._answers[0], logs=result.stdout, is_final_answer=True)
        if result.status is RunStatus.OK:
            return CodeOutput(output=result.value, logs=result.stdout, is_final_answer=False)
        raise InterpreterError(failure_message(result))


class StreamingModel:
    """A smolagents model whose ``generate_stream`` also feeds a ``PysolateExecutor``.

    Everything else (``generate``, ``model_id``, ``to_dict``...) is the wrapped model's.
    The deltas are passed on unchanged, so the agent shows and parses what it always did.
    """

    def __init__(self, model: Any, executor: PysolateExecutor, *, code_block_tags: tuple[str, str]) -> None:
        self.model = model
        self.executor = executor
        self.code_block_tags = code_block_tags

    def generate_stream(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        feed = self.executor.open_stream(self.code_block_tags)
        for delta in self.model.generate_stream(*args, **kwargs):
            content = getattr(delta, "content", None)
            if isinstance(content, str) and content:
                feed(content)
            yield delta

    def generate(self, *args: Any, **kwargs: Any) -> Any:
        return self.model.generate(*args, **kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.model(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)


class _LoopThread:
    """An event loop in a daemon thread, reached through a blocking portal.

    Not ``anyio.from_thread.start_blocking_portal``: its worker thread is joined at
    interpreter exit, so an executor whose ``cleanup()`` was never called would hang the
    process. A daemon thread does not; ``stop()`` ends the loop and joins it.
    """

    def __init__(self) -> None:
        ready = threading.Event()
        box: list[anyio.from_thread.BlockingPortal] = []

        async def main() -> None:
            async with anyio.from_thread.BlockingPortal() as portal:
                box.append(portal)
                ready.set()
                await portal.sleep_until_stopped()

        self._thread = threading.Thread(target=anyio.run, args=(main,), name="pysolate-smolagents", daemon=True)
        self._thread.start()
        ready.wait()
        self.portal = box[0]

    def stop(self) -> None:
        self.portal.call(self.portal.stop)
        self._thread.join()


def _signature(tool: Any) -> inspect.Signature:
    """The signature the program calls ``tool`` with: its ``forward``'s (without the
    ``self`` that ``@tool`` writes into its static ``forward``'s signature), or the callable's."""
    forward = getattr(tool, "forward", None)
    signature = inspect.signature(forward if callable(forward) else tool)
    parameters = list(signature.parameters.values())
    if callable(forward) and not inspect.ismethod(forward) and parameters and parameters[0].name == "self":
        signature = signature.replace(parameters=parameters[1:])
    return signature


def _caller(tool: Any) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        return tool(*args, **kwargs)

    return call
