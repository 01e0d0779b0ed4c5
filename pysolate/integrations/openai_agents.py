"""OpenAI Agents SDK: ``PysolateCodeTool``, a ``run_code`` tool for an ``agents.Agent``.

::

    code = PysolateCodeTool(effects={"search": Effect.PURE})
    agent = code.agent(Agent(name="assistant", tools=[search, save_note], model=model))
    result = Runner.run_streamed(agent, "...")       # or: await Runner.run(agent, "...")

``code.agent(plain)`` is a clone of ``plain`` whose model calls ``run_code(code=...)``; the
program runs in a Pysolate Guest, where

- the agent's plain function tools (``@function_tool``, no approval, guardrails, timeout
  or ``is_enabled`` condition) are the program's top-level functions (``search(...)``),
  no longer offered to the model (``program_tools=False`` keeps them there); each call is
  the tool's own invocation (its JSON validation, its function), its return value reaches
  the program in its JSON form, and a failure raises in the program at the call;
- the Host's own capabilities (``docs.search(...)``, a ``Workspace``) are there too;
- an agent tool is ``unknown`` — never run early — unless ``effects`` qualifies it by name.

Streaming. ``Runner.run_streamed`` asks the model for a stream of Responses events; the
clone's model is the agent's, wrapped (``code.model(model)``) so that it passes every
event on unchanged and feeds the ``run_code`` call's argument deltas
(``response.function_call_arguments.delta``, matched by ``output_index``) to
``host.run_stream(..., code=ToolCallCode("run_code"))`` as they arrive. Reads declared safe
start while the model is still writing and the Guest starts meanwhile; the run is sealed
only when the runner invokes the tool, and only if the streamed arguments decode to
exactly the code it was invoked with (``integrations._gated``). Otherwise the streamed run
is dropped (nothing of it ran in a Guest) and the code runs whole. ``Runner.run`` asks for
whole responses: each program runs when the call arrives (said once: a
``NotStreamingWarning``; ``stream=False`` says whole programs are meant).

An agent tool that takes the run context (``RunContextWrapper``/``ToolContext`` first) gets
the context of the ``run_code`` call it is part of, which exists once the runner invokes
the tool: an early call of such a tool starts then (still before the program reaches it);
one that takes no context starts as soon as its arguments have streamed.

The streamed runs are tasks of the running (asyncio) loop, owned by this tool: each ends
when its call is invoked, superseded, or when the run it belongs to ends (the SDK's
run-end cleanup of the model), whichever is first; ``aclose()`` ends any left.

A model given by name (or none: the default model) is resolved through the SDK's default
provider (``MultiProvider``); with a custom ``RunConfig.model_provider`` or a
``RunConfig.model`` override, wrap that model yourself: ``code.model(my_model)``.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import json
from collections.abc import AsyncIterator, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import anyio
from agents import Agent, FunctionTool, Model, ModelResponse, RunContextWrapper
from agents.function_schema import function_schema
from agents.tool import set_function_tool_failure_error_function
from agents.tool_context import ToolContext
from openai.types.responses import (
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseFunctionToolCall,
    ResponseOutputItemAddedEvent,
)
from pydantic_core import to_jsonable_python

from .._exceptions import NotStreamingWarning
from .._report._result import RunResult, RunStatus
from .._run._host import Host
from .._run._setup_warnings import warn_once
from ..streams import ToolCallCode
from ..tracing import code_action
from ._common import Qualification, check_function_name, failure_message
from ._gated import GatedRun
from ._program import DESCRIPTION, Bridges, describe_program, tool_arguments, with_setup_notes

try:  # the SDK's record of which run a model call belongs to (what its run-end cleanup names)
    from agents.models._run_context import get_model_run_owner
except ImportError:  # pragma: no cover - an SDK without it: every call is of one "run"

    def get_model_run_owner() -> object | None:
        return None


__all__ = ["PysolateCodeTool"]

NOT_STREAMING = (
    "PysolateCodeTool: the {tool} call's code arrived whole (Runner.run, or a model that does not "
    "stream the call's arguments), so nothing started while the model wrote it; each program runs "
    "when the call arrives. Run the agent with Runner.run_streamed(code.agent(agent), ...) so its "
    "model feeds the arguments as they stream; PysolateCodeTool(stream=False) says whole programs "
    "are meant."
)
"""The ``NotStreamingWarning`` message (``tool``: the code tool's name)."""


@dataclass(slots=True, eq=False)
class _Program:
    """What a program's calls of agent tools go through: the tools, and the context of the
    ``run_code`` call (set when the runner invokes it; ``ready`` then)."""

    tools: Mapping[str, _Moved]
    call_id: str | None
    context: ToolContext[Any] | None = None
    ready: anyio.Event = field(default_factory=anyio.Event)

    def invoked(self, context: ToolContext[Any]) -> None:
        self.context = context
        self.ready.set()


@dataclass(frozen=True, slots=True)
class _Moved:
    """An agent tool moved into the program: a copy whose failures raise (not the SDK's
    error text for the model), and whether its function takes the run context."""

    tool: FunctionTool
    takes_context: bool


_PROGRAM: ContextVar[_Program | None] = ContextVar("pysolate_openai_agents_program", default=None)
"""Set in the task that runs a program; the bridge functions registered on the Host read it."""

_BRIDGES = Bridges()
"""The agent tools this integration registered on each Host."""


class PysolateCodeTool:
    """A ``run_code`` tool backed by a Pysolate Host, for OpenAI Agents SDK agents (module
    docstring).

    ``host``: where programs run (default: a new ``Host()``). ``effects``: qualification
    of agent tools by name (``Effect`` or ``MethodSpec``); every other tool is ``unknown``.
    ``program_tools``: move the agent's plain function tools into the program (default) or
    leave them to the model. ``stream``: start programs while the call streams.
    ``speculate=False`` runs every program sequentially (the reference). ``format_result``:
    the tool's output for a run that ended ``ok`` (default: JSON ``{"value", "stdout"}``).
    After each call ``last_result`` is its ``RunResult``.
    """

    def __init__(
        self,
        host: Host | None = None,
        *,
        tool_name: str = "run_code",
        effects: Mapping[str, Qualification] | None = None,
        program_tools: bool = True,
        stream: bool = True,
        speculate: bool = True,
        format_result: Callable[[RunResult], str] | None = None,
    ) -> None:
        check_function_name(tool_name, "tool name")
        self.host = host if host is not None else Host()
        self.tool_name = tool_name
        self.effects = dict(effects or {})
        self.program_tools = program_tools
        self.stream = stream
        self.speculate = speculate
        self.format_result = format_result
        self.last_result: RunResult | None = None
        self._moved: dict[str, _Moved] = {}  # the program's agent tools, by name
        self._unqualified: str | None = None  # the note every run carries, if any
        self._pending: dict[
            str, tuple[GatedRun, _Program, object]
        ] = {}  # call id → run, program, owner
        self._tasks: set[asyncio.Task[None]] = set()
        self.tool = FunctionTool(
            name=tool_name,
            description=DESCRIPTION,
            params_json_schema={
                "type": "object",
                "properties": {
                    "code": {
                        "type": "string",
                        "description": "the complete Python source; its last expression is the result",
                    }
                },
                "required": ["code"],
                "additionalProperties": False,
            },
            on_invoke_tool=self._invoke,
        )
        """The ``run_code`` ``FunctionTool`` itself (``code.agent`` adds it)."""

    # -- setup ----------------------------------------------------------------------------

    def agent(self, agent: Agent[Any]) -> Agent[Any]:
        """A clone of ``agent`` with the ``run_code`` tool, its plain function tools moved
        into the program (``program_tools``), and its model wrapped to stream the code.

        Raises ``RegistrationError`` for a name in ``effects`` that is not one of the
        moved tools, a tool whose name or parameters cannot be a Python function, or a
        different tool under a name this Host already bridges.
        """
        moved = (
            [t for t in agent.tools if isinstance(t, FunctionTool) and _movable(t)]
            if self.program_tools
            else []
        )
        kept = [t for t in agent.tools if not any(t is m for m in moved)]
        self._expose({t.name: t for t in moved})
        return agent.clone(
            tools=[self.tool, *kept],
            model=self.model(agent.model),
            model_settings=agent.model_settings,
        )

    def model(self, model: Model | str | None) -> Model:
        """``model`` wrapped so that a streamed response feeds this tool's runs (a name or
        None is resolved by the SDK's default provider on first use)."""
        return _StreamingModel(self, model)

    async def aclose(self) -> None:
        """Abort every streamed run still waiting for its call, and wait until their early
        work is stopped. Idempotent."""
        for run, _, _ in list(self._pending.values()):
            await run.supersede()
        self._pending.clear()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def describe(self) -> str:
        """The ``run_code`` description: what runs, and every function the program has."""
        return describe_program(self.host, DESCRIPTION)

    def _expose(self, tools: Mapping[str, FunctionTool]) -> None:
        shapes = {
            name: (_defaults_optional(tool.params_json_schema), tool.description)
            for name, tool in tools.items()
        }
        self._unqualified = _BRIDGES.expose(
            self.host, "PysolateCodeTool", self.effects, shapes, _bridge
        )
        for name, tool in tools.items():
            quiet = set_function_tool_failure_error_function(copy.copy(tool), None)
            self._moved[name] = _Moved(quiet, _takes_context(tool))
        self.tool.description = self.describe()

    # -- streaming ------------------------------------------------------------------------

    def _start(self, call_id: str, owner: object) -> GatedRun:
        """A gated run for the streamed call ``call_id``, its task started in the loop."""
        previous = self._pending.pop(call_id, None)
        if previous is not None:  # the same call streamed again (a retried request)
            previous[0].drop()
        run = GatedRun.open(call_id)
        program = _Program(dict(self._moved), call_id)
        self._pending[call_id] = (run, program, owner)
        task = asyncio.get_running_loop().create_task(self._run_streamed(run, program))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return run

    async def _run_streamed(self, run: GatedRun, program: _Program) -> None:
        _PROGRAM.set(program)
        result: RunResult | None = None
        error: Exception | None = None
        try:
            with code_action(tool_call_id=run.call_id):
                result = await self.host.run_stream(
                    run.chunks(), code=ToolCallCode(self.tool_name), speculate=self.speculate
                )
        except Exception as exc:  # handed to the tool call that waits for it
            error = exc
        finally:
            run.finish(result, error)

    async def _run_ended(self, owner: object) -> None:
        """The SDK's run ``owner`` ended: its calls that were never invoked are dropped."""
        for call_id, (run, _, of) in list(self._pending.items()):
            if of is owner:
                del self._pending[call_id]
                await run.supersede()

    # -- the tool -------------------------------------------------------------------------

    async def _invoke(self, ctx: ToolContext[Any], arguments: str) -> str:
        try:
            code = json.loads(arguments).get("code")
        except (ValueError, AttributeError):
            code = None
        if type(code) is not str:
            return f"The {self.tool_name} arguments must be a JSON object with a string 'code'."
        pending = self._pending.pop(ctx.tool_call_id, None)
        whole = None
        if pending is not None and not pending[0].decided and pending[0].carries("code", code):
            run, program, _ = pending
            program.invoked(ctx)
            run.confirm()
            result = await run.outcome()
        else:
            if pending is not None:
                await pending[0].supersede()
            elif self.stream:
                whole = NOT_STREAMING.format(tool=self.tool_name)
                warn_once(self, "not-streaming", NotStreamingWarning, whole)
            program = _Program(dict(self._moved), ctx.tool_call_id)
            program.invoked(ctx)
            token = _PROGRAM.set(program)
            try:
                with code_action(tool_call_id=ctx.tool_call_id):
                    result = await self.host.run_source(code, speculate=self.speculate)
            finally:
                _PROGRAM.reset(token)
        result = with_setup_notes(result, self.host, whole=whole, unqualified=self._unqualified)
        self.last_result = result
        if result.status is not RunStatus.OK:
            return failure_message(result)
        if self.format_result is not None:
            return self.format_result(result)
        return json.dumps(
            {"value": result.value, "stdout": result.stdout}, default=repr, ensure_ascii=False
        )


class _StreamingModel(Model):
    """The agent's model, passing every call through; a streamed response's ``run_code``
    calls also feed the code tool's gated runs."""

    def __init__(self, code: PysolateCodeTool, model: Model | str | None) -> None:
        self._code = code
        self._given = model
        self._model: Model | None = model if isinstance(model, Model) else None

    def _wrapped(self) -> Model:
        if self._model is None:
            from agents.models.multi_provider import MultiProvider

            self._model = MultiProvider().get_model(
                self._given if isinstance(self._given, str) else None
            )
        return self._model

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        return await self._wrapped().get_response(*args, **kwargs)

    async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        owner = get_model_run_owner()
        following: dict[int, GatedRun] = {}  # output index → the run its argument deltas feed
        async for event in self._wrapped().stream_response(*args, **kwargs):
            if isinstance(event, ResponseOutputItemAddedEvent) and self._code.stream:
                item = event.item
                if (
                    isinstance(item, ResponseFunctionToolCall)
                    and item.name == self._code.tool_name
                    and item.call_id
                ):
                    run = following[event.output_index] = self._code._start(item.call_id, owner)
                    if item.arguments:
                        run.feed(item.arguments)
            elif isinstance(event, ResponseFunctionCallArgumentsDeltaEvent):
                fed = following.get(event.output_index)
                if fed is not None:
                    fed.feed(event.delta)
            yield event

    def get_retry_advice(self, request: Any) -> Any:
        return self._wrapped().get_retry_advice(request)

    async def _cleanup_on_run_end(self, owner: object) -> None:
        await self._code._run_ended(owner)
        if self._model is not None:
            await self._model._cleanup_on_run_end(owner)

    async def close(self) -> None:
        await self._code.aclose()
        if self._model is not None:
            await self._model.close()


def _movable(tool: FunctionTool) -> bool:
    """A plain function tool the program may call as the runner would: nothing the runner
    adds around an invocation (approval, guardrails, a timeout, a condition) is skipped."""
    return (
        tool.needs_approval is False
        and not tool.tool_input_guardrails
        and not tool.tool_output_guardrails
        and tool.timeout_seconds is None
        and tool.is_enabled is True
        and not tool.defer_loading
    )


def _defaults_optional(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    """``schema`` with every property that has a ``default`` optional: a strict schema lists
    all properties as required (OpenAI's strict mode asks it), yet the tool applies the
    default when one is left out, so the program may leave it out too."""
    properties = schema.get("properties") or {}
    required = [
        n
        for n in schema.get("required") or ()
        if not (isinstance(properties.get(n), Mapping) and "default" in properties[n])
    ]
    return {**schema, "required": required}


def _takes_context(tool: FunctionTool) -> bool:
    """Whether the tool's function takes the run context (unknown, for a hand-made
    ``FunctionTool``: assumed, so it waits for the context)."""
    try:
        return function_schema(tool.__wrapped__).takes_context
    except Exception:  # no wrapped function, or one the SDK's own parser refuses
        return True


def _bridge(
    name: str, signature: inspect.Signature, optional: frozenset[str]
) -> Callable[..., Any]:
    """The Host side of agent tool ``name``: invoke it in the current program's run, with
    the run's context, and hand back its JSON form."""

    async def call(*args: Any, **kwargs: Any) -> Any:
        program = _PROGRAM.get()
        moved = program.tools.get(name) if program is not None else None
        if program is None or moved is None:
            raise LookupError(f"agent tool {name!r} is not available in this run")
        arguments = json.dumps(tool_arguments(signature, optional, args, kwargs))
        if moved.takes_context:
            await program.ready.wait()
        base: RunContextWrapper[Any] | None = program.context
        shared = (
            {"context": base.context, "usage": base.usage}
            if base is not None
            else {"context": None}
        )
        ctx = ToolContext(
            **shared, tool_name=name, tool_call_id=program.call_id or name, tool_arguments=arguments
        )
        return to_jsonable_python(await moved.tool.on_invoke_tool(ctx, arguments))

    return call
