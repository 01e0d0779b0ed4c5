"""What a program is given in a framework's code tool: its functions, and their description.

An agent framework describes a tool by a JSON schema of its parameters; the program calls
it as a Python function, which the broker binds against a signature (so ``search("q")``
and ``search(query="q")`` are one call key). ``signature_from_schema`` makes that
signature; ``Bridges`` registers an agent's tools on a Host as such functions, once per
Host, and says once when ``effects=`` lets none of them start early. ``describe_program``
is the code tool's description (``DESCRIPTION``, then every function and capability
method the program may call, with its signature, effect and docstring), so the model
writes calls that bind; ``with_setup_notes`` adds to a run's report what the setup gained
nothing from. Shared by the OpenAI Agents SDK and Pydantic AI code tools.
"""

from __future__ import annotations

import inspect
import keyword
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from .._exceptions import RegistrationError, UnqualifiedToolsWarning
from .._report._result import RunResult
from .._run._code_tool import describe_callables
from .._run._host import Host
from .._run._setup_warnings import noted, unqualified_agent_tools, warn_once
from ._common import Qualification, check_function_name, qualifications, tool_function

DESCRIPTION = (
    "Run a Python program in an isolated interpreter (standard library only; no files, network "
    "or subprocesses). Call the functions below directly; the value of the last expression is "
    "returned together with everything the program printed. Nothing persists between calls."
)
"""The start of the ``run_code`` tool's description; the available functions follow."""

Bridge = Callable[[str, inspect.Signature, frozenset[str]], Callable[..., Any]]
"""Makes the Host side of one agent tool: ``bridge(name, signature, optional)``."""


def signature_from_schema(schema: Mapping[str, Any]) -> tuple[inspect.Signature, frozenset[str]]:
    """A signature the broker binds calls against, from a tool's JSON schema, and the
    optional parameters that have no default (``None`` there means "not passed").

    Parameters keep the schema's order; a required parameter after an optional one, and
    every parameter after it, is keyword-only (as Python requires). Raises
    ``RegistrationError`` for a property whose name cannot be a Python parameter.
    """
    properties: Mapping[str, Any] = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    parameters: list[inspect.Parameter] = []
    optional: set[str] = set()
    seen_default = keyword_only = False
    for name, prop in properties.items():
        if not name.isidentifier() or keyword.iskeyword(name):
            raise RegistrationError(f"tool parameter {name!r} is not a Python identifier")
        default: object = inspect.Parameter.empty
        if name in required:
            keyword_only = keyword_only or seen_default
        elif isinstance(prop, Mapping) and "default" in prop:
            default, seen_default = prop["default"], True
        else:
            default, seen_default = None, True
            optional.add(name)
        kind = (
            inspect.Parameter.KEYWORD_ONLY
            if keyword_only
            else inspect.Parameter.POSITIONAL_OR_KEYWORD
        )
        parameters.append(inspect.Parameter(name, kind, default=default))
    return inspect.Signature(parameters), frozenset(optional)


def tool_arguments(
    signature: inspect.Signature,
    optional: frozenset[str],
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
) -> dict[str, Any]:
    """What a program's call of an agent tool passes it: bound against the tool's
    ``signature``, without the ``optional`` parameters left at None (not passed)."""
    bound = signature.bind(*args, **kwargs)
    return {k: v for k, v in bound.arguments.items() if not (k in optional and v is None)}


def describe_program(host: Host, intro: str) -> str:
    """``intro``, then every function the program has on ``host`` (sorted), as the raw
    SDKs' code tool lists them (``describe_callables``: signature, effect, docstring)."""
    return "\n".join([intro, "", "Functions:", describe_callables(host)])


class Bridges:
    """The agent tools one integration registered on each Host as bridge functions.

    One per integration (a bridge reads its own integration's current program), kept per
    Host in a weak table: name → (signature, spec), so a tool seen again on the same Host
    (the next agent, the next step) is not registered twice, and one that changed its
    parameters or effect is refused.
    """

    def __init__(self) -> None:
        self._by_host: weakref.WeakKeyDictionary[
            Host, dict[str, tuple[inspect.Signature, object]]
        ] = weakref.WeakKeyDictionary()

    def expose(
        self,
        host: Host,
        setup: str,
        effects: Mapping[str, Qualification],
        tools: Mapping[str, tuple[Mapping[str, Any], str | None]],
        bridge: Bridge,
    ) -> str | None:
        """Register ``tools`` (name → (its parameters' JSON schema, its description)) on
        ``host``, each through ``bridge``; the note every run of ``setup`` carries when
        ``effects`` names none of them, else None.

        Raises ``RegistrationError`` for a name that cannot be a program's function, a
        parameter that cannot be a Python one, or a tool that changed since this Host got it.
        """
        specs = qualifications(effects, list(tools))
        message = unqualified_agent_tools(setup, list(tools), effects)
        if message is not None:
            # The Host's own warning would say the same of the same tools: said once, here.
            warn_once(host, "unqualified", UnqualifiedToolsWarning, message)
        bridges = self._by_host.setdefault(host, {})
        for name, (schema, description) in tools.items():
            check_function_name(name, "agent tool")
            signature, optional = signature_from_schema(schema)
            known = bridges.get(name)
            if known is not None:
                if known != (signature, specs[name]):
                    raise RegistrationError(
                        f"agent tool {name!r} changed its parameters or effect since it was registered on this Host"
                    )
                continue
            doc = (description or "").strip() or None
            host.register(
                name,
                tool_function(
                    name,
                    bridge(name, signature, optional),
                    signature,
                    specs[name],
                    is_async=True,
                    doc=doc,
                ),
            )
            bridges[name] = (signature, specs[name])
        return message


def with_setup_notes(
    result: RunResult, host: Host, *, whole: str | None, unqualified: str | None
) -> RunResult:
    """``result`` noting what its setup gained nothing from: ``whole``, that the call's code
    arrived whole (``NotStreamingWarning``'s text), and ``unqualified``, that ``effects=``
    named none of the agent's tools (in place of the Host's own note of the same tools)."""
    if whole is not None:
        result = noted(result, [whole])
    if unqualified is not None:
        result = noted(result, [unqualified], replacing=host.setup_warnings())
    return result
