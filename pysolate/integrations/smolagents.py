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

State. As smolagents' own executor does, the program's variables persist from one code
action to the next: the actions of an executor are turns of one Host session
(``host.session()``; ``keep_state=False`` runs each in a fresh Guest). ``additional_args``
become globals of the session. A turn that stops the Guest (a limit, a crash) breaks the
session; its error says the variables are gone, and the next action starts a new one.

Said once per executor, with the fix (``pysolate.PysolateWarning``; the run's
``report.setup_warnings`` repeats it): a code action that arrived whole because the agent
does not stream through the executor (``NotStreamingWarning``), and tools of which
``effects`` names none (``UnqualifiedToolsWarning``).

Not supported: tool results that are not plain data, imports beyond the standard library.
"""

from __future__ import annotations

import ast
import concurrent.futures
import inspect
import keyword
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.from_thread
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from smolagents.local_python_executor import CodeOutput, InterpreterError, PythonExecutor

from occurrences import Effect, MethodSpec

from .._exceptions import (
    NotStreamingWarning,
    PysolateError,
    RegistrationError,
    UnqualifiedToolsWarning,
)
from .._report._result import RunResult, RunStatus
from .._run._host import Host
from .._run._session import Session, SessionLimits
from .._run._setup_warnings import noted, unqualified_agent_tools, warn_once
from ._code_tail import DEFAULT_CODE_BLOCK_TAGS, CodeTail
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
from ._loop import HeldSession, LoopThread

__all__ = ["CodeTail", "ExecutorStatistics", "FinalAnswer", "PysolateExecutor", "StreamingModel"]

RESTARTED = "(The interpreter was restarted: variables from earlier steps are gone.)"
"""Starts the logs of the first action after the session broke between actions."""
STOPPED = "The interpreter was stopped: variables from earlier steps are gone."
"""Ends the error of an action that broke the session (a limit, a crash)."""


NOT_STREAMING = (
    "PysolateExecutor: the code action arrived whole (the agent's model output did not stream "
    "through the executor), so nothing started while the model wrote it; each action runs when "
    "smolagents has parsed it. Stream it: CodeAgent(..., model=executor.streaming(model), "
    "executor=executor, stream_outputs=True)."
)
"""The ``NotStreamingWarning`` message."""


class FinalAnswer(Exception):
    """Raised in the program by ``final_answer(...)`` so nothing after it runs.

    The program sees it as ``ToolError('FinalAnswer: ...')`` (a Host cannot raise a
    ``BaseException`` in the Guest); the step ends with the answer even if the program
    catches it, as smolagents' own ``FinalAnswerException`` would have ended it.
    """


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
    receive: MemoryObjectReceiveStream[str | bool]
    tail: CodeTail
    result: concurrent.futures.Future[RunResult] = field(default_factory=concurrent.futures.Future)
    fed: list[str] = field(default_factory=list)  # the code chunks sent, in order
    ended: bool = False  # (in the loop) the queue is closed: the run was decided or ended

    def put(self, item: str | bool) -> None:
        """(In the loop) queue ``item``; ``CONFIRM``/``SUPERSEDE`` end the queue. Nothing
        is queued once it ended (a run that stopped on its own, a decided one)."""
        if self.ended:
            return
        self.send.send_nowait(item)
        if type(item) is bool:
            self.close()

    def close(self) -> None:
        self.ended = True
        self.send.close()


class PysolateExecutor(PythonExecutor):
    """A ``CodeAgent`` executor that runs each code action as a Pysolate program.

    ``host`` (default: a new ``Host()``) is where the agent's tools are registered, next to
    any capabilities the builder registered on it (so one executor per Host). ``effects``
    qualifies tools by name (``Effect`` or ``MethodSpec``); all others are ``unknown``.
    ``speculate=False`` runs each action sequentially (the reference). ``keep_state``
    (default) runs the actions as turns of one session, with ``session_limits``. After each
    action ``last_result`` holds the full ``RunResult`` (receipts, report, timeline).

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
        keep_state: bool = True,
        session_limits: SessionLimits | None = None,
    ) -> None:
        self.host = host if host is not None else Host()
        self.speculate = speculate
        self.keep_state = keep_state
        self._session_limits = session_limits
        self._held: HeldSession | None = None  # the session the actions run in (keep_state)
        self._restarted = False  # the session broke since the last action: say so in its logs
        self._variables = ""  # assignments the next session turn makes first
        self.state: dict[str, Any] = {}
        self.last_result: RunResult | None = None
        self._effects = dict(effects or {})
        self._tools: dict[str, object] = {}  # what this executor registered, by name
        self._answers: list[object] = []  # final_answer(...) values of the current action
        self._loop: LoopThread | None = None
        self._streamed: _StreamedRun | None = None  # at most one: the current step's
        self._counts = {"sealed": 0, "dropped": 0, "whole": 0}
        self._notes: tuple[str, ...] = ()  # setup warnings every action's report carries

    # -- PythonExecutor -------------------------------------------------------------------

    def send_tools(self, tools: Mapping[str, Any]) -> None:
        """Register the agent's tools as top-level functions (again on every ``agent.run``:
        a tool already registered is kept; another tool under a taken name raises
        ``RegistrationError``)."""
        specs = qualifications(self._effects, list(tools))
        if "final_answer" in specs and "final_answer" not in self._effects:
            # It ends the action: never early, like a write (and no reason to warn about it).
            specs["final_answer"] = MethodSpec(Effect.WRITE, "0")
        unqualified = unqualified_agent_tools(
            "PysolateExecutor", [n for n in tools if n != "final_answer"], self._effects
        )
        if unqualified is not None:
            self._notes = (unqualified,)
            warn_once(self.host, "unqualified", UnqualifiedToolsWarning, unqualified)
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
                function = tool_function(
                    name, _caller(tool), _signature(tool), specs[name], is_async=False
                )
            self.host.register(name, function)
            self._tools[name] = tool

    def send_variables(self, variables: Mapping[str, Any]) -> None:
        """Make ``variables`` (``agent.run(..., additional_args=...)``) globals of the session.

        They are assigned by a turn of their own, as literals, so each must be plain data
        that its ``repr`` gives back exactly. Raises ``PysolateError`` for one that is not,
        for a name that is not an identifier, and when ``keep_state`` is off (no session to
        keep them in).
        """
        if not variables:
            return
        if not self.keep_state:
            raise PysolateError(
                f"variables ({', '.join(sorted(variables))}) need keep_state=True: without a "
                "session each code action runs in a fresh Guest"
            )
        # Set by the next action's session, which also has the tools (the agent sends
        # variables before tools, and a session's Guest knows the functions it opened with).
        self._variables = assignments(variables)

    def __call__(self, code_action: str) -> CodeOutput:
        """Run ``code_action`` (sealing the streamed run when the stream was its prefix)."""
        portal = self._ensure_portal()
        streamed, self._streamed = self._streamed, None
        self._answers = []
        self.state["_print_outputs"] = ""
        fed = "".join(streamed.fed) if streamed is not None else ""
        notes = self._notes
        if streamed is not None and not streamed.result.done() and code_action.startswith(fed):
            rest = code_action[len(fed) :]
            if rest:
                portal.call(streamed.put, rest)
            portal.call(streamed.put, CONFIRM)
            result = streamed.result.result()
            self._counts["sealed"] += 1
        else:
            if streamed is not None:
                self._abandon(streamed)
                self._counts["dropped"] += 1
            else:
                warn_once(self, "not-streaming", NotStreamingWarning, NOT_STREAMING)
                notes += (NOT_STREAMING,)
            result = portal.call(self._run_source, code_action)
            self._counts["whole"] += 1
        if notes:
            result = noted(result, notes, replacing=self.host.setup_warnings())
        self.last_result = result
        return self._code_output(result)

    def statistics(self) -> ExecutorStatistics:
        """How the code actions so far ran: sealed from the model's stream, or whole
        (``dropped`` of those had streamed text that was not a prefix of the parsed code)."""
        return ExecutorStatistics(**self._counts)

    def cleanup(self) -> None:
        """Abort a streamed run still open, close the session (its Guest stops) and stop
        the executor's event-loop thread."""
        if self._streamed is not None:
            self._abandon(self._streamed)
            self._streamed = None
        if self._held is not None and self._loop is not None:
            held, self._held = self._held, None
            self._loop.portal.call(held.close)
        if self._loop is not None:
            loop, self._loop = self._loop, None
            loop.stop()

    # -- streaming ------------------------------------------------------------------------

    def streaming(
        self, model: Any, *, code_block_tags: tuple[str, str] | None = None
    ) -> StreamingModel:
        """``model`` wrapped so that its streamed output feeds this executor (pass the
        agent's ``code_block_tags`` when they are not CodeAgent's default)."""
        return StreamingModel(
            model, self, code_block_tags=code_block_tags or DEFAULT_CODE_BLOCK_TAGS
        )

    def open_stream(
        self, code_block_tags: tuple[str, str] = DEFAULT_CODE_BLOCK_TAGS
    ) -> Callable[[str], None]:
        """Start a streamed run for the step now being generated; return the feed function
        that takes the model's text deltas. A previous step's unsealed run is aborted."""
        portal = self._ensure_portal()
        if self._streamed is not None:
            self._abandon(self._streamed)
        send, receive = anyio.create_memory_object_stream[str | bool](math.inf)
        streamed = _StreamedRun(send, receive, CodeTail(code_block_tags))
        streamed.result = portal.start_task_soon(self._run_streamed, streamed)
        self._streamed = streamed

        def feed(text: str) -> None:
            code = streamed.tail.feed(text)
            if code and self._streamed is streamed:
                streamed.fed.append(code)
                portal.call(streamed.put, code)

        return feed

    async def _run_streamed(self, streamed: _StreamedRun) -> RunResult:
        try:
            session = await self._session()
            if session is None:
                return await self.host.run_stream(
                    until_confirmed(streamed.receive), speculate=self.speculate
                )
            return await session.run_stream(
                until_confirmed(streamed.receive), speculate=self.speculate
            )
        finally:  # both ends of the queue close with the run, however it ended
            streamed.close()
            streamed.receive.close()

    async def _run_source(self, source: str, speculate: bool | None = None) -> RunResult:
        speculate = self.speculate if speculate is None else speculate
        session = await self._session()
        if session is None:
            return await self.host.run_source(source, speculate=speculate)
        return await session.run_source(source, speculate=speculate)

    async def _session(self) -> Session | None:
        """The session actions run in (in the loop): opened on first use, replaced when it
        broke (its globals are gone; the next action's logs say so)."""
        if not self.keep_state:
            return None
        if self._held is not None and (
            not self._held.usable or self._held.capabilities != self.host.capabilities()
        ):
            held, self._held = self._held, None
            await held.close()
            self._restarted = True
        if self._held is None:
            assert self._loop is not None
            self._held = await HeldSession.open(self.host, self._session_limits, self._loop.group)
        session = self._held.session
        assert session is not None
        if self._variables:
            source, self._variables = self._variables, ""
            result = await session.run_source(source, speculate=False)
            if result.status is not RunStatus.OK:
                raise PysolateError(
                    f"the agent's variables could not be set: {failure_message(result)}"
                )
        return session

    def _abandon(self, streamed: _StreamedRun) -> None:
        """Abort an unsealed streamed run and wait until its early work is stopped."""
        if self._loop is not None and not streamed.result.done():
            self._loop.portal.call(streamed.put, SUPERSEDE)
        concurrent.futures.wait([streamed.result])

    def _ensure_portal(self) -> anyio.from_thread.BlockingPortal:
        if self._loop is None:
            self._loop = LoopThread()
        return self._loop.portal

    # -- results --------------------------------------------------------------------------

    def _final_answer(self, tool: Any) -> Callable[..., Any]:
        def final_answer(*args: Any, **kwargs: Any) -> Any:
            self._answers.append(tool(*args, **kwargs))
            raise FinalAnswer("final_answer() ends the code action")

        return final_answer

    def _code_output(self, result: RunResult) -> CodeOutput:
        logs = result.stdout
        if self._restarted:
            self._restarted = False
            logs = f"{RESTARTED}\n{logs}"
        self.state["_print_outputs"] = logs
        if self._answers:
            return CodeOutput(output=self._answers[0], logs=logs, is_final_answer=True)
        if result.status is RunStatus.OK:
            return CodeOutput(output=result.value, logs=logs, is_final_answer=False)
        message = failure_message(result)
        if self._held is not None and not self._held.usable:
            message += f"\n{STOPPED}"
        if logs is not result.stdout:
            message = f"{RESTARTED}\n{message}"
        raise InterpreterError(message)


class StreamingModel:
    """A smolagents model whose ``generate_stream`` also feeds a ``PysolateExecutor``.

    Everything else (``generate``, ``model_id``, ``to_dict``...) is the wrapped model's.
    The deltas are passed on unchanged, so the agent shows and parses what it always did.
    """

    def __init__(
        self, model: Any, executor: PysolateExecutor, *, code_block_tags: tuple[str, str]
    ) -> None:
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


def _signature(tool: Any) -> inspect.Signature:
    """The signature the program calls ``tool`` with: its ``forward``'s (without the
    ``self`` that ``@tool`` writes into its static ``forward``'s signature), or the callable's."""
    forward = getattr(tool, "forward", None)
    signature = inspect.signature(forward if callable(forward) else tool)
    parameters = list(signature.parameters.values())
    if (
        callable(forward)
        and not inspect.ismethod(forward)
        and parameters
        and parameters[0].name == "self"
    ):
        signature = signature.replace(parameters=parameters[1:])
    return signature


def _caller(tool: Any) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        return tool(*args, **kwargs)

    return call


def assignments(variables: Mapping[str, Any]) -> str:
    """Source assigning each variable its value as a literal; ``PysolateError`` for a name
    that is not an identifier or a value its ``repr`` does not give back exactly."""
    lines = []
    for name, value in variables.items():
        if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
            raise PysolateError(f"variable name {name!r} is not a Python identifier")
        literal = repr(value)
        try:
            exact = _same(ast.literal_eval(literal), value)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            exact = False
        if not exact:
            raise PysolateError(
                f"variable {name!r} is not plain data the program can be given ({type(value).__name__})"
            )
        lines.append(f"{name} = {literal}")
    return "\n".join(lines) + "\n"


def _same(a: object, b: object) -> bool:
    """Equal with the same types all the way down (so ``1 == 1.0 == True`` do not pass)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list | tuple):
        assert isinstance(b, list | tuple)
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        assert isinstance(b, dict)
        pairs = zip(a.items(), b.items(), strict=False)
        return len(a) == len(b) and all(
            _same(ka, kb) and _same(va, vb) for (ka, va), (kb, vb) in pairs
        )
    return a == b
