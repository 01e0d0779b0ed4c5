"""Agent tools as the program's top-level functions, qualified only by the builder.

An agent framework's tools (a smolagents ``Tool``, a Pydantic AI tool definition) carry no
Pysolate effect: a framework's ``read_only`` flag or an MCP hint is the tool author's
claim, not the Host's decision (docs/contract.md, rule 2). So every tool is ``unknown`` —
never run early — unless the builder names it in an ``effects`` mapping; nothing is
inferred. ``tool_function`` wraps a tool's call in a plain function with an exact
signature (call keys bind against it) and the declared effect, which the Host registers
as a top-level global (``host.register(name, fn)``).
"""

from __future__ import annotations

import inspect
import keyword
from collections.abc import AsyncIterator, Callable, Collection, Mapping
from typing import Any

from anyio.streams.memory import MemoryObjectReceiveStream

from occurrences import Effect, MethodSpec

from .._exceptions import RegistrationError
from .._report._result_text import result_text
from .._tools._capability import capability

failure_message = result_text
"""What a failed run tells the model: ``pysolate.result_text``, the one copy of that text."""

CONFIRM = True
SUPERSEDE = False
"""The last item of a gated run's queue: seal what was fed, or abort the run."""

Qualification = Effect | MethodSpec
"""How a builder qualifies one tool: an ``Effect`` (version ``"0"``) or a ``MethodSpec``."""


def qualifications(
    effects: Mapping[str, Qualification] | None, tools: Collection[str]
) -> dict[str, MethodSpec]:
    """The spec of every tool in ``tools``: the builder's, else ``unknown`` version ``"0"``.

    Raises ``RegistrationError`` for a qualified name that is not one of ``tools`` (a typo
    would otherwise leave the intended tool unqualified without a word) or a value that
    is neither an ``Effect`` nor a ``MethodSpec``.
    """
    effects = dict(effects or {})
    unknown = sorted(set(effects) - set(tools))
    if unknown:
        raise RegistrationError(f"effects name tools the agent does not have: {', '.join(unknown)}")
    specs: dict[str, MethodSpec] = {}
    for name in tools:
        value = effects.get(name, Effect.UNKNOWN)
        if type(value) is Effect:
            specs[name] = MethodSpec(value, "0")
        elif isinstance(value, MethodSpec):
            specs[name] = value
        else:
            raise RegistrationError(
                f"effects[{name!r}] must be an Effect or a MethodSpec, not {type(value).__name__}"
            )
    return specs


def check_function_name(name: str, what: str) -> None:
    """Raise ``RegistrationError`` unless ``name`` can be a top-level function of a program."""
    if (
        not isinstance(name, str)
        or not name.isidentifier()
        or keyword.iskeyword(name)
        or name.startswith("_")
    ):
        raise RegistrationError(f"{what} {name!r} cannot be a Python function name in the program")


def tool_function(
    name: str,
    call: Callable[..., Any],
    signature: inspect.Signature,
    spec: MethodSpec,
    *,
    is_async: bool,
    doc: str | None = None,
) -> Callable[..., Any]:
    """A function named ``name`` with ``signature`` whose calls are ``call(*args, **kwargs)``,
    declared ``@capability`` with ``spec``'s effect and version.

    ``is_async`` says whether ``call`` returns an awaitable (the broker awaits async
    functions and runs sync ones in a worker thread).
    """

    async def async_function(*args: Any, **kwargs: Any) -> Any:
        return await call(*args, **kwargs)

    def sync_function(*args: Any, **kwargs: Any) -> Any:
        return call(*args, **kwargs)

    function: Callable[..., Any] = async_function if is_async else sync_function
    function.__name__ = function.__qualname__ = name
    function.__doc__ = doc
    function.__signature__ = signature  # type: ignore[attr-defined]
    return capability(effect=spec.effect, version=spec.version, scope=spec.scope)(function)


def tool_name(capability_name: str, method: str) -> str:
    """``docs.search``, or ``search`` for a top-level function tool."""
    return method if capability_name == "" else f"{capability_name}.{method}"


class Superseded(Exception):
    """The framework's final code is not what streamed: the gated run is aborted unsealed."""


async def until_confirmed(receive: MemoryObjectReceiveStream[str | bool]) -> AsyncIterator[str]:
    """The chunks of a gated run, ending only on ``CONFIRM``.

    A streamed run must seal exactly the code the framework finally hands over, which is
    known only after the stream: the chunks stay open until then. ``SUPERSEDE``, or the
    queue closing without confirmation, raises ``Superseded`` (the run is ``aborted`` before
    any Guest ran), so a partial stream is never sealed.
    """
    async with receive:
        async for item in receive:
            if item is CONFIRM:
                return
            if item is SUPERSEDE:
                raise Superseded("the framework's final code is not what streamed")
            assert isinstance(item, str)
            yield item
    raise Superseded("the stream ended without the framework's final code")
