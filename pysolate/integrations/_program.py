"""What a program is given in a framework's code tool: its functions, and their description.

An agent framework describes a tool by a JSON schema of its parameters; the program calls
it as a Python function, which the broker binds against a signature (so ``search("q")``
and ``search(query="q")`` are one call key). ``signature_from_schema`` makes that
signature. ``describe_program`` is the code tool's description: what runs, and every
function and capability method the program may call, with its signature, effect and
docstring, so the model writes calls that bind.
"""

from __future__ import annotations

import inspect
import keyword
from collections.abc import Mapping
from typing import Any

from .._code_tool import describe_callables
from .._exceptions import RegistrationError
from .._host import Host


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
        kind = inspect.Parameter.KEYWORD_ONLY if keyword_only else inspect.Parameter.POSITIONAL_OR_KEYWORD
        parameters.append(inspect.Parameter(name, kind, default=default))
    return inspect.Signature(parameters), frozenset(optional)


def describe_program(host: Host, intro: str) -> str:
    """``intro``, then every function the program has on ``host`` (sorted), as the raw
    SDKs' code tool lists them (``describe_callables``: signature, effect, docstring)."""
    return "\n".join([intro, "", "Functions:", describe_callables(host)])
