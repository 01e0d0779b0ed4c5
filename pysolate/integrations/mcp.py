"""MCP servers' tools as Pysolate capabilities (optional extra ``pysolate[mcp]``).

``await pysolate.mcp.register(host, session, capability="kb", confirm={...})`` lists the
tools of a connected ``mcp.ClientSession`` (the official SDK) and registers each one, as a
method of the capability ``kb`` (the program calls ``kb.search(...)``) or, without
``capability``, as a top-level function tool (``search(...)``). What the hand-written glue
used to do, once and exactly:

- **signature**: the tool's ``inputSchema`` (an object schema) becomes a Python signature
  the broker binds calls against, so ``search("q")`` and ``search(query="q")`` are one call
  key. Properties keep their order and are positional-or-keyword while every required one
  comes before every optional one; otherwise the optional ones are keyword-only. An
  optional property's default is the schema's ``default``; without one it is ``None``, and
  ``None`` is then not sent (the server applies its own default). A property whose name is
  not a Python identifier (or is a keyword) cannot be a parameter: such a tool is refused
  unless renamed or left out (``tools=``).
- **results**: ``structuredContent`` when the server sent it - unwrapped when it is the
  ``{"result": value}`` wrapper the SDK's servers put around a non-object return value
  (output schema: an object with exactly the one required property ``result``); otherwise
  the content blocks: a text block is its ``str``, any other block its JSON object; one
  block is the value itself, several a list, none ``None``.
- **errors**: a result with ``isError`` raises ``ToolError`` (``type_name`` ``MCPToolError``,
  the text content as message) in the program, at the call; a protocol failure raises what
  the SDK raised, as for any tool.
- **effects**: annotations are *proposals* (``pysolate.propose_effect``). A proposal that
  could run early (``immutable_read``) is used only when the Host confirms it; unconfirmed,
  the tool is a ``live_read`` (read-only is trusted, immutability is not, so it never runs
  early). A proposal that can never run early (``write``, ``live_read``, ``unknown``)
  needs no confirmation. ``confirm`` names tools by their program name (``"kb.search"``,
  or ``"search"`` for a function tool) and maps them to the Host's effect, which may be any
  effect; a collection of names confirms their proposals as they are.

All tools registered from one session as function tools share the ``FUNCTIONS``
capability, and with ``capability=`` one capability object: either way one unit of state,
so a write through any of them moves every one to a new view (docs/tools.md). Each call is
one ``tools/call`` request; cancelling it cancels the request (the SDK's behaviour).
"""

from __future__ import annotations

import inspect
import keyword
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

try:
    import mcp.types as mcp_types
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("pysolate.mcp needs the MCP SDK: pip install 'pysolate[mcp]'") from exc

from occurrences import Effect

from .._exceptions import RegistrationError
from .._guest_api import ToolFailure
from .._run._host import Host
from .._tools._capability import EffectProposal, capability, propose_effect

__all__ = ["MCP_TOOL_ERROR", "RegisteredTool", "ToolSession", "register"]

MCP_TOOL_ERROR = "MCPToolError"
"""``ToolError.type_name`` the program sees for a tool result with ``isError``."""


class ToolSession(Protocol):
    """What ``register`` needs of a connected session (``mcp.ClientSession``)."""

    async def list_tools(
        self, *, params: mcp_types.PaginatedRequestParams | None = None
    ) -> mcp_types.ListToolsResult: ...

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> Any: ...


@dataclass(frozen=True, slots=True)
class RegisteredTool:
    """What ``register`` did with one MCP tool."""

    name: str
    """Its name in the program: ``kb.search``, or ``search`` for a function tool."""
    tool: str
    """Its name on the server."""
    effect: Effect
    """The effect it was registered with."""
    proposal: EffectProposal
    """What its annotations proposed."""
    confirmed: bool
    """Whether the Host's ``confirm`` decided the effect."""


async def register(
    host: Host,
    session: ToolSession,
    *,
    capability: str | None = None,
    confirm: Mapping[str, Effect] | Collection[str] = (),
    tools: Collection[str] | None = None,
    rename: Mapping[str, str] | None = None,
    version: str = "0",
) -> list[RegisteredTool]:
    """Register the tools of ``session`` on ``host`` (see the module docstring).

    ``tools`` (server names) selects which tools to register (default: all listed);
    ``rename`` maps server names to program names (for names that are not identifiers);
    ``version`` is every tool's capability version. Nothing is registered unless every
    selected tool can be (the checks run first).

    Raises ``RegistrationError`` for a tool whose schema cannot become a signature, a name
    that cannot be registered, a ``confirm`` or ``tools`` entry that names no listed tool,
    or a ``confirm`` value that is not an ``Effect``; the SDK's errors from listing tools
    propagate. Cancellation propagates (nothing is registered).
    """
    listed = await _list_tools(session)
    by_name = {t.name: t for t in listed}
    unknown = sorted(set(tools or ()) - set(by_name))
    if unknown:
        raise RegistrationError(f"tools= names no tool of the server: {unknown}")
    selected = [by_name[n] for n in tools] if tools is not None else listed
    renames = dict(rename or {})
    program = {t.name: renames.get(t.name, t.name) for t in selected}
    if len(set(program.values())) < len(program):
        raise RegistrationError(
            f"two tools would have the same name in the program: {sorted(program.values())}"
        )
    qualified = {
        t.name: f"{capability}.{program[t.name]}" if capability else program[t.name]
        for t in selected
    }
    decisions = _decisions(confirm, set(qualified.values()))
    built: list[tuple[str, Callable[..., Any], RegisteredTool]] = []
    for tool in selected:
        name = program[tool.name]
        if not name.isidentifier() or keyword.iskeyword(name):
            raise RegistrationError(
                f"MCP tool {tool.name!r}: not an identifier; rename it (rename=) or leave it out (tools=)"
            )
        proposal = propose_effect(tool.annotations)
        effect, confirmed = _effect(proposal, decisions.get(qualified[tool.name], _NO_DECISION))
        fn = _tool_function(session, tool, name, effect, version)
        built.append(
            (name, fn, RegisteredTool(qualified[tool.name], tool.name, effect, proposal, confirmed))
        )
    if capability is None:
        for name, _, _ in built:
            host.check_name(name)
        for name, fn, _ in built:
            host.register(name, fn)
    else:
        namespace = {name: _as_method(fn) for name, fn, _ in built}
        host.register(capability, type(f"MCP_{capability}", (), namespace)())
    return [record for _, _, record in built]


async def _list_tools(session: ToolSession) -> list[mcp_types.Tool]:
    """Every tool the server lists, following pagination."""
    found: list[mcp_types.Tool] = []
    cursor: str | None = None
    while True:
        params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
        page = await session.list_tools(params=params)
        found.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            return found


_NO_DECISION = object()
"""``confirm`` says nothing about a tool."""


def _decisions(
    confirm: Mapping[str, Effect] | Collection[str], names: set[str]
) -> dict[str, Effect | None]:
    """``confirm`` as name → the Host's effect (None: confirm the proposal as it is)."""
    if isinstance(confirm, str):
        raise RegistrationError(
            "confirm= takes a mapping of names to effects, or a collection of names"
        )
    decided: dict[str, Effect | None] = (
        dict(confirm) if isinstance(confirm, Mapping) else dict.fromkeys(confirm)
    )
    for name, effect in decided.items():
        if effect is not None and type(effect) is not Effect:
            raise RegistrationError(
                f"confirm[{name!r}] must be an Effect, not {type(effect).__qualname__}"
            )
    unknown = sorted(set(decided) - names)
    if unknown:
        raise RegistrationError(
            f"confirm= names no registered tool: {unknown} (tools: {sorted(names)})"
        )
    return decided


def _effect(proposal: EffectProposal, decision: object) -> tuple[Effect, bool]:
    """The effect a tool is registered with, and whether the Host decided it."""
    if isinstance(decision, Effect):
        return decision, True
    if decision is None:
        return proposal.confirm(), True
    if proposal.effect.speculable:
        return Effect.LIVE_READ, False  # read-only is trusted, immutability is not
    return proposal.effect, False


def _tool_function(
    session: ToolSession, tool: mcp_types.Tool, name: str, effect: Effect, version: str
) -> Callable[..., Any]:
    """An async function calling ``tool`` with the signature its input schema gives."""
    signature, omit_none = _signature(tool)
    server_name = tool.name
    wrapped = _wraps_result(tool.output_schema)

    async def call(*args: object, **kwargs: object) -> object:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        arguments = {k: v for k, v in bound.arguments.items() if not (v is None and k in omit_none)}
        result = await session.call_tool(server_name, arguments)
        return result_value(result, unwrap=wrapped)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = tool.description
    call.__signature__ = signature  # type: ignore[attr-defined]
    return capability(effect=effect, version=version)(call)


def _as_method(fn: Callable[..., Any]) -> Any:
    """``fn`` as a method of a capability class: same declaration, ``self`` ignored."""
    signature: inspect.Signature = fn.__signature__  # type: ignore[attr-defined]
    declaration = fn.__pysolate_capability__  # type: ignore[attr-defined]

    async def method(self: object, *args: object, **kwargs: object) -> object:
        return await fn(*args, **kwargs)

    method.__name__ = method.__qualname__ = fn.__name__
    method.__doc__ = fn.__doc__
    self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)
    bound = signature.replace(parameters=[self_param, *signature.parameters.values()])
    method.__signature__ = bound  # type: ignore[attr-defined]
    method.__pysolate_capability__ = declaration  # type: ignore[attr-defined]
    return method


def _signature(tool: mcp_types.Tool) -> tuple[inspect.Signature, frozenset[str]]:
    """The signature of ``tool``'s input schema, and the parameters whose ``None`` is not sent."""
    schema = tool.input_schema
    if schema.get("type", "object") != "object":
        raise RegistrationError(f"MCP tool {tool.name!r}: its input schema is not an object schema")
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    if not isinstance(properties, Mapping) or not required <= set(properties):
        raise RegistrationError(
            f"MCP tool {tool.name!r}: required names a property the schema does not define"
        )
    names = list(properties)
    for prop in names:
        if not isinstance(prop, str) or not prop.isidentifier() or keyword.iskeyword(prop):
            raise RegistrationError(
                f"MCP tool {tool.name!r}: property {prop!r} cannot be a Python parameter; leave the tool out (tools=)"
            )
    ordered = all(p in required for p in names[: len(required)])  # required ones come first
    params: list[inspect.Parameter] = []
    omit_none: set[str] = set()
    for prop in names:
        spec = properties[prop] if isinstance(properties[prop], Mapping) else {}
        if prop in required:
            params.append(inspect.Parameter(prop, inspect.Parameter.POSITIONAL_OR_KEYWORD))
            continue
        kind = (
            inspect.Parameter.POSITIONAL_OR_KEYWORD if ordered else inspect.Parameter.KEYWORD_ONLY
        )
        if "default" in spec:
            params.append(inspect.Parameter(prop, kind, default=spec["default"]))
        else:
            params.append(inspect.Parameter(prop, kind, default=None))
            omit_none.add(prop)
    params.sort(key=lambda p: p.kind)  # stable: keyword-only ones after the rest
    return inspect.Signature(params), frozenset(omit_none)


def _wraps_result(output_schema: Mapping[str, Any] | None) -> bool:
    """Whether structured results are the SDK servers' ``{"result": value}`` wrapper."""
    if not output_schema or output_schema.get("type") != "object":
        return False
    properties = output_schema.get("properties") or {}
    return list(properties) == ["result"] and list(output_schema.get("required") or ()) == [
        "result"
    ]


def result_value(result: mcp_types.CallToolResult, *, unwrap: bool = False) -> object:
    """The value the program sees for a ``tools/call`` result (module docstring).

    Raises ``ToolFailure`` (``MCPToolError``) for a result with ``isError``.
    """
    if result.is_error:
        text = "\n".join(b.text for b in result.content if isinstance(b, mcp_types.TextContent))
        raise ToolFailure(MCP_TOOL_ERROR, text or "the tool reported an error")
    structured = result.structured_content
    if structured is not None:
        if unwrap and isinstance(structured, dict) and list(structured) == ["result"]:
            return structured["result"]
        return structured
    blocks: Sequence[object] = [_block_value(b) for b in result.content]
    if not blocks:
        return None
    return blocks[0] if len(blocks) == 1 else list(blocks)


def _block_value(block: object) -> Any:
    if isinstance(block, mcp_types.TextContent):
        return block.text
    dump: Callable[..., object] = block.model_dump  # type: ignore[attr-defined]
    return dump(mode="json", by_alias=True, exclude_none=True)
