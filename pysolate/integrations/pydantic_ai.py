"""Pydantic AI: ``PysolateCodeMode``, a capability that gives an agent a ``run_code`` tool.

::

    agent = Agent(model, tools=[search, save],
                  capabilities=[PysolateCodeMode(effects={"search": Effect.PURE})])

The model calls ``run_code(code=...)``; the program runs in a Pysolate Guest, where

- the agent's function tools are the program's top-level functions (``search(...)``): they
  are no longer offered to the model directly (``program_tools=False`` keeps them there),
  each call is validated and run by its own toolset as Pydantic AI would, and its return
  value reaches the program in its JSON form (what the model would have seen);
- the Host's own capabilities (``docs.search(...)``, a ``Workspace``) are there too, with
  the effects the Host declared;
- an agent tool is ``unknown`` — never run early — unless ``effects`` qualifies it by name;
- the run's trace records the ``run_code`` call's id and the conversation's
  (``pysolate.tracing.code_action``);
- the value of the last expression and what the program printed come back as the tool's
  return value (``{"value": ..., "stdout": ...}``, or ``format_result(result)``), the full
  ``RunResult`` as its ``metadata``; a program that raises, is rejected or stopped becomes
  a ``ModelRetry`` telling the model where and why, which calls may have changed something
  and what it printed.

Streaming, with the framework's own event hooks, when the model streams: ``on_event`` sees the model's
``PartStartEvent``/``PartDeltaEvent`` of a ``run_code`` call while it streams, and feeds the
JSON argument deltas to ``host.run_stream(..., code=ToolCallCode("run_code"))``, so reads the
Host (or ``effects``) declared safe start while the model is still writing, and the Guest
starts meanwhile. The run is sealed only when Pydantic AI executes the tool call with the
validated ``code``, and only if the streamed arguments decode to exactly that code: the
program that runs is always the tool call's argument. Otherwise (arguments given as a dict,
a provider that sends no deltas) the streamed run is dropped — nothing of it ran in a Guest
— and the code runs from scratch. The background runs live in a task group that
``wrap_run`` holds for the agent run, so none outlives it.

A model that cannot stream (``FunctionModel(function=...)``, a custom ``Model`` without
``request_stream``) is not made to: the capability listens to events only when the run's
model can stream, so ``agent.run()`` makes plain requests and each program runs whole when
the call arrives. ``TestModel`` streams, but sends arguments as one object, and writes the
``code`` argument from the parameter's ``examples`` (a small valid program). Either way the
run is correct and nothing starts while the model writes, which the capability says once
(``NotStreamingWarning``) unless ``stream=False`` says it is meant; agent tools that
``effects`` names none of are said once too (``UnqualifiedToolsWarning``).

Per-run state lives on the instance ``for_run`` returns, as Pydantic AI asks; the Host is
shared. Not durable-execution aware (the Host and its Guests are process-local).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Annotated, Any

import anyio
from anyio.abc import TaskGroup
from pydantic import Field
from pydantic_ai import ModelRetry, RunContext, ToolReturn
from pydantic_ai.capabilities import AbstractCapability, on_event
from pydantic_ai.messages import (
    AgentStreamEvent,
    PartDeltaEvent,
    PartEndEvent,
    PartStartEvent,
    ToolCallPart,
    ToolCallPartDelta,
)
from pydantic_ai.models import Model
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.tools import Tool
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset, ToolsetTool, WrapperToolset
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

__all__ = ["PysolateCodeMode"]

EXAMPLE = "total = sum(range(10))\nprint(total)\ntotal"
"""The ``code`` parameter's example in its JSON schema: what a program looks like (its
last expression is the result), and the program ``TestModel`` writes."""

NOT_STREAMING = (
    "PysolateCodeMode: the {tool} call's code arrived whole ({why}), so nothing started while the "
    "model wrote it; each program runs when the call arrives. The program starts while the model "
    "writes only with a model that streams tool-call argument deltas (every provider's model; "
    "FunctionModel(stream_function=...) in tests). PysolateCodeMode(stream=False) says whole "
    "programs are meant."
)
"""The ``NotStreamingWarning`` message (``tool``, and ``why``: what the model did)."""


@dataclass(frozen=True, slots=True)
class _Program:
    """What a program's calls of agent tools go through: this run's tools and context."""

    toolset: AbstractToolset[Any]
    tools: Mapping[str, ToolsetTool[Any]]
    ctx: RunContext[Any]
    call_id: str | None


_PROGRAM: ContextVar[_Program | None] = ContextVar("pysolate_pydantic_ai_program", default=None)
"""Set in the task that runs a program; the bridge functions registered on the Host read it."""

_BRIDGES = Bridges()
"""The agent tools this integration registered on each Host."""


@dataclass
class PysolateCodeMode(AbstractCapability[Any]):
    """Give the agent a ``run_code`` tool backed by a Pysolate Host (module docstring).

    ``host``: where programs run (default: a new ``Host()``); register capabilities on it
    for the program. ``effects``: qualification of agent tools by name (``Effect`` or
    ``MethodSpec``); every other tool is ``unknown``. ``program_tools``: move the agent's
    function tools into the program (default) or leave them to the model. ``stream``:
    start programs while the tool call streams. ``speculate=False`` runs every program
    sequentially (the reference). ``format_result``: the tool's return value for a run
    that ended ``ok`` (default ``{"value": ..., "stdout": ...}``).
    """

    host: Host = field(default_factory=Host)
    tool_name: str = "run_code"
    effects: Mapping[str, Qualification] = field(default_factory=dict)
    program_tools: bool = True
    stream: bool = True
    speculate: bool = True
    format_result: Callable[[RunResult], Any] | None = None
    _group: TaskGroup | None = field(default=None, init=False, repr=False)
    _by_index: dict[int, GatedRun] = field(default_factory=dict, init=False, repr=False)
    _by_id: dict[str, GatedRun] = field(default_factory=dict, init=False, repr=False)
    _model_streams: bool = field(
        default=True, init=False, repr=False
    )  # this run's model can stream
    _setup: _Setup = field(default_factory=lambda: _Setup(), init=False, repr=False, compare=False)
    _toolset: AbstractToolset[Any] | None = field(default=None, init=False, repr=False)
    _moved: dict[str, ToolsetTool[Any]] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        check_function_name(self.tool_name, "tool name")

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # holds a Host: not spec-serializable

    async def for_run(self, ctx: RunContext[Any]) -> PysolateCodeMode:
        run = dataclasses.replace(self)
        run._setup = self._setup  # one setup: what it said once stays said
        run._model_streams = _can_stream(ctx.model)
        return run

    @property
    def has_on_event(self) -> bool:
        """Listen to the run's events (which makes ``agent.run()`` stream the model's
        responses) only when the run's model can stream: a model that cannot is asked
        plainly, and each program runs whole."""
        return self._model_streams and super().has_on_event

    def get_toolset(self) -> FunctionToolset[Any]:
        async def run_code(
            ctx: RunContext[Any], code: Annotated[str, Field(examples=[EXAMPLE])]
        ) -> ToolReturn:
            """Run a Python program.

            Args:
                code: the complete Python source; its last expression is the result.
            """
            return await self._run_code(ctx, code)

        return FunctionToolset(
            [Tool(run_code, takes_ctx=True, name=self.tool_name, description=DESCRIPTION)]
        )

    def get_wrapper_toolset(self, toolset: AbstractToolset[Any]) -> AbstractToolset[Any] | None:
        return _CodeModeToolset(toolset, owner=self)

    async def wrap_run(self, ctx: RunContext[Any], *, handler: Any) -> Any:
        """Hold the task group the streamed runs live in; cancel what is left at the end."""
        async with anyio.create_task_group() as group:
            self._group = group
            try:
                return await handler()
            finally:
                self._group = None
                group.cancel_scope.cancel()

    # -- streaming ------------------------------------------------------------------------

    @on_event(PartStartEvent, PartDeltaEvent, PartEndEvent)
    async def _follow_tool_call(self, ctx: RunContext[Any], event: AgentStreamEvent) -> None:
        if isinstance(event, PartStartEvent):
            previous = self._by_index.pop(event.index, None)
            if previous is not None:
                await previous.supersede()
            part = event.part
            if (
                self.stream
                and self._group is not None
                and isinstance(part, ToolCallPart)
                and part.tool_name == self.tool_name
            ):
                self._start_streamed(ctx, event.index, part)
        elif isinstance(event, PartDeltaEvent):
            streamed = self._by_index.get(event.index)
            delta = event.delta
            if streamed is None or not isinstance(delta, ToolCallPartDelta):
                return
            if isinstance(delta.args_delta, str):
                streamed.feed(delta.args_delta)
            elif delta.args_delta is not None:
                streamed.broken = True
            if delta.tool_call_id is not None:
                self._rekey(streamed, delta.tool_call_id)
        elif isinstance(event, PartEndEvent):
            streamed = self._by_index.pop(event.index, None)
            if streamed is not None and isinstance(event.part, ToolCallPart):
                self._rekey(streamed, event.part.tool_call_id)

    def _start_streamed(self, ctx: RunContext[Any], index: int, part: ToolCallPart) -> None:
        assert self._group is not None
        streamed = GatedRun.open(part.tool_call_id)
        self._by_index[index] = streamed
        if part.tool_call_id:
            self._by_id[part.tool_call_id] = streamed
        if isinstance(part.args, str):
            if part.args:
                streamed.feed(part.args)
        elif part.args:
            streamed.broken = True
        program = self._program(ctx, part.tool_call_id)
        self._group.start_soon(self._run_streamed, streamed, program)

    def _rekey(self, streamed: GatedRun, call_id: str) -> None:
        if streamed.call_id != call_id:
            if streamed.call_id is not None and self._by_id.get(streamed.call_id) is streamed:
                del self._by_id[streamed.call_id]
            streamed.call_id = call_id
            self._by_id[call_id] = streamed

    async def _run_streamed(self, streamed: GatedRun, program: _Program) -> None:
        _PROGRAM.set(program)
        result: RunResult | None = None
        error: Exception | None = None
        try:
            with code_action(
                tool_call_id=program.call_id, conversation_id=program.ctx.conversation_id
            ):
                result = await self.host.run_stream(
                    streamed.chunks(), code=ToolCallCode(self.tool_name), speculate=self.speculate
                )
        except Exception as exc:  # handed to the tool call that waits for it
            error = exc
        finally:
            streamed.finish(result, error)

    # -- the tool -------------------------------------------------------------------------

    async def _run_code(self, ctx: RunContext[Any], code: str) -> ToolReturn:
        streamed = self._by_id.pop(ctx.tool_call_id, None) if ctx.tool_call_id else None
        if streamed is not None and not streamed.decided and streamed.carries("code", code):
            streamed.confirm()
            result = await streamed.outcome()
            whole = None
        else:
            whole = self._whole(streamed)
            if streamed is not None:
                await streamed.supersede()
            token = _PROGRAM.set(self._program(ctx, ctx.tool_call_id))
            try:
                with code_action(
                    tool_call_id=ctx.tool_call_id, conversation_id=ctx.conversation_id
                ):
                    result = await self.host.run_source(code, speculate=self.speculate)
            finally:
                _PROGRAM.reset(token)
        result = with_setup_notes(
            result, self.host, whole=whole, unqualified=self._setup.unqualified
        )
        if result.status is not RunStatus.OK:
            raise ModelRetry(failure_message(result))
        value = (
            self.format_result(result)
            if self.format_result is not None
            else {"value": result.value, "stdout": result.stdout}
        )
        return ToolReturn(return_value=value, metadata=result)

    def _whole(self, streamed: GatedRun | None) -> str | None:
        """Why this call's code was not streamed, said once per setup (None: it was, or
        ``stream=False`` asked for whole programs)."""
        if not self.stream:
            return None
        if not self._model_streams:
            why = "the model cannot stream: FunctionModel(function=...), or no request_stream"
        elif streamed is None or streamed.broken:
            why = "the model sent the arguments as one object, as TestModel does, not as JSON text deltas"
        else:
            return None
        message = NOT_STREAMING.format(tool=self.tool_name, why=why)
        warn_once(self._setup, "not-streaming", NotStreamingWarning, message)
        return message

    def _program(self, ctx: RunContext[Any], call_id: str | None) -> _Program:
        return _Program(self._toolset or FunctionToolset(), dict(self._moved), ctx, call_id)

    # -- agent tools as program functions -------------------------------------------------

    def expose(self, toolset: AbstractToolset[Any], tools: Mapping[str, ToolsetTool[Any]]) -> None:
        """Register ``tools`` (this step's agent tools) on the Host as bridge functions."""
        self._toolset = toolset
        self._moved = dict(tools)
        shapes = {
            name: (tool.tool_def.parameters_json_schema, tool.tool_def.description)
            for name, tool in tools.items()
        }
        self._setup.unqualified = _BRIDGES.expose(
            self.host, "PysolateCodeMode", self.effects, shapes, _bridge
        )

    def describe(self) -> str:
        """The ``run_code`` description: what runs, and every function the program has."""
        return describe_program(self.host, DESCRIPTION)


@dataclass
class _CodeModeToolset(WrapperToolset[Any]):
    """The agent's toolset as the model sees it: ``run_code`` (described with the program's
    functions) and, unless ``program_tools`` is off, none of the agent's function tools.
    Tools that are not plain function tools (needing approval, external, loaded on demand)
    stay with the model."""

    owner: PysolateCodeMode = field(kw_only=True)

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        tools = await super().get_tools(ctx)
        name = self.owner.tool_name
        own = tools.get(name)
        if own is None:
            return tools
        moved = (
            {
                n: t
                for n, t in tools.items()
                if n != name and t.tool_def.kind == "function" and not t.tool_def.defer_loading
            }
            if self.owner.program_tools
            else {}
        )
        self.owner.expose(self.wrapped, moved)
        kept = {n: t for n, t in tools.items() if n not in moved}
        kept[name] = dataclasses.replace(
            own, tool_def=dataclasses.replace(own.tool_def, description=self.owner.describe())
        )
        return kept


@dataclass(slots=True, eq=False, weakref_slot=True)
class _Setup:
    """What one ``PysolateCodeMode`` (and every per-run copy of it) shares: the owner of
    its once-only warnings, and the unqualified-tools message its runs note."""

    unqualified: str | None = None


def _can_stream(model: object) -> bool:
    """Whether ``model`` can answer a streamed request (a wrapper: its wrapped model)."""
    while isinstance(model, WrapperModel):
        model = model.wrapped
    if isinstance(model, FunctionModel):
        return model.stream_function is not None
    return getattr(type(model), "request_stream", None) is not Model.request_stream


def _bridge(
    name: str, signature: inspect.Signature, optional: frozenset[str]
) -> Callable[..., Any]:
    """The Host side of agent tool ``name``: validate and call it in the current program's
    run, and hand back its JSON form."""

    async def call(*args: Any, **kwargs: Any) -> Any:
        program = _PROGRAM.get()
        tool = program.tools.get(name) if program is not None else None
        if program is None or tool is None:
            raise LookupError(f"agent tool {name!r} is not available in this run")
        arguments = tool_arguments(signature, optional, args, kwargs)
        validated = tool.args_validator.validate_python(
            arguments, context=program.ctx.validation_context
        )
        ctx = dataclasses.replace(program.ctx, tool_name=name, tool_call_id=program.call_id)
        if tool.args_validator_func is not None:
            checked = tool.args_validator_func(ctx, **validated)
            if inspect.isawaitable(checked):
                await checked
        result = await program.toolset.call_tool(name, validated, ctx, tool)
        return to_jsonable_python(result)

    return call
