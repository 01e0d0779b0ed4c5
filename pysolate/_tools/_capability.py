"""Capabilities: Host methods the Guest may call, each with a declared effect.

Only the Host qualifies a method (docs/contract.md, rule 2). The ``capability`` decorator
records the declaration on the function; ``capability_methods`` reads the declarations of
an object once, at registration, and refuses anything the broker could not call exactly
(a private name, a default that is not plain data, since defaults become part of the call
key).

MCP tool annotations (``readOnlyHint``, ``openWorldHint``, ``idempotentHint``,
``destructiveHint``) are hints from the tool's author, not the Host's qualification.
``propose_effect`` turns them into an ``EffectProposal``, which ``capability`` refuses
until the Host calls ``confirm()``: a hint alone never makes a tool eligible to run early.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

from occurrences import Effect, MethodSpec, NotPlain, check_plain

from .._exceptions import RegistrationError
from ._binding import Binder

F = TypeVar("F", bound=Callable[..., Any])

_MARKER = "__pysolate_capability__"
"""Attribute the decorator sets on a function; its value is the ``Declaration``."""


@dataclass(frozen=True, slots=True)
class BatchLaw:
    """``m(x, **rest)`` ≡ ``getattr(self, method)([x_1, ..., x_n], **rest)[i]`` for ``x = x_i``.

    Declared by the Host on a pure or immutable-read method (the one the program calls);
    ``method`` names a pure or immutable-read capability method of the same object taking
    the list of ``param`` values plus the other arguments by name. Its result is a list of
    the same length whose element ``i`` is the value of the ``i``-th call, or the exception
    that call would have raised. Bump ``version`` whenever the law's meaning changes.
    Used by ``pysolate.passes`` (``capability_batch_fusion``); it never grants authority.
    """

    method: str
    param: str
    version: str


@dataclass(frozen=True, slots=True)
class ProjectionLaw:
    """``m(*a, **k).splitlines()[:n]`` ≡ ``getattr(self, method)(*a, **k, <limit>=n)``.

    ``n`` is a non-negative int literal. Declared by the Host, exact for every argument
    (the same value and the same exception); ``method`` is a pure or immutable-read method
    of the same object. Used by ``pysolate.passes`` (``capability_projection_pushdown``).
    """

    method: str
    limit: str
    version: str
    projection: str = "splitlines_head"


@dataclass(frozen=True, slots=True)
class Declaration:
    """What ``@capability(...)`` declared on one function."""

    effect: Effect
    version: str
    cost: float | None
    batch: BatchLaw | None = None
    projection: ProjectionLaw | None = None
    scope: str | None = None


@dataclass(frozen=True, slots=True)
class CapabilityMethod:
    """One callable capability method of a registered object, as the broker sees it."""

    name: str
    effect: Effect
    version: str
    cost: float | None
    signature: inspect.Signature  # without ``self``; call keys bind against it
    is_async: bool
    batch: BatchLaw | None = None
    projection: ProjectionLaw | None = None
    scope: str | None = None  # a parameter of ``signature``, checked at registration
    # Derived once from the fields above (every Guest call uses both).
    spec: MethodSpec = field(init=False, repr=False, compare=False)
    binder: Binder = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "spec", self._spec())
        object.__setattr__(self, "binder", Binder(self.signature))

    def _spec(self) -> MethodSpec:
        if self.scope is None:
            return MethodSpec(self.effect, self.version)
        positional = [
            p.name
            for p in self.signature.parameters.values()
            if p.kind
            in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        ]
        position = positional.index(self.scope) if self.scope in positional else None
        return MethodSpec(self.effect, self.version, self.scope, position)


@overload
def capability(fn: F, /) -> F: ...
@overload
def capability(
    *,
    effect: Effect = Effect.UNKNOWN,
    version: str = "0",
    cost: float | None = None,
    batch: BatchLaw | None = None,
    projection: ProjectionLaw | None = None,
    scope: str | None = None,
) -> Callable[[F], F]: ...


def capability(
    fn: F | None = None,
    /,
    *,
    effect: Effect = Effect.UNKNOWN,
    version: str = "0",
    cost: float | None = None,
    batch: BatchLaw | None = None,
    projection: ProjectionLaw | None = None,
    scope: str | None = None,
) -> F | Callable[[F], F]:
    """Mark a method as callable from the Guest, with its effect, version and cost.

    ``effect`` defaults to ``Effect.UNKNOWN`` (treated as a write: never early). Bump
    ``version`` whenever results for the same arguments may change, so no stale early
    result is ever claimed. ``cost`` (optional) is what one call charges the speculation
    budget. ``batch`` and ``projection`` declare exact rewrite laws the optional passes may
    use (``BatchLaw``, ``ProjectionLaw``); they are checked at registration. ``scope``
    names the parameter whose value is the only part of the object's state the method
    reads or writes (docs/tools.md, "Scopes"): a read is then still tried early after a
    write of a scope that cannot overlap its own. Usable bare (``@capability``) or called.

    Raises ``RegistrationError`` when ``effect`` is not an ``Effect`` (in particular an
    unconfirmed ``EffectProposal``), ``version`` is not a str, ``cost`` is negative, or
    ``scope`` is not an identifier or is declared with effect ``UNKNOWN`` (a method whose
    effect is not known cannot promise what it touches).
    """
    if isinstance(effect, EffectProposal):
        raise RegistrationError(
            f"effect {effect.effect.value!r} is only proposed (from MCP hints); "
            "the Host must confirm it with .confirm()"
        )
    if type(effect) is not Effect:
        raise RegistrationError(f"effect must be an Effect, not {type(effect).__qualname__}")
    if type(version) is not str:
        raise RegistrationError("version must be a str")
    if cost is not None and not cost >= 0:
        raise RegistrationError("cost must be a non-negative number")
    if batch is not None and type(batch) is not BatchLaw:
        raise RegistrationError("batch must be a BatchLaw")
    if projection is not None and type(projection) is not ProjectionLaw:
        raise RegistrationError("projection must be a ProjectionLaw")
    if scope is not None and (type(scope) is not str or not scope.isidentifier()):
        raise RegistrationError("scope must be the name of a parameter")
    if scope is not None and effect is Effect.UNKNOWN:
        raise RegistrationError("scope needs a declared effect (effect UNKNOWN may touch anything)")
    declaration = Declaration(
        effect, version, None if cost is None else float(cost), batch, projection, scope
    )

    def mark(f: F) -> F:
        if not callable(f):
            raise RegistrationError("@capability decorates functions")
        setattr(f, _MARKER, declaration)
        return f

    return mark if fn is None else mark(fn)


def capability_methods(obj: object) -> dict[str, CapabilityMethod]:
    """The capability methods of ``obj``, by name, read from its class's declarations.

    Raises ``RegistrationError`` for a class (an instance is meant), when ``obj`` has
    none, when one has a private name, when a parameter default is not plain data
    (defaults are part of the call key), or when a declared scope is not a parameter that
    can be passed by name.
    """
    if isinstance(obj, type):
        raise RegistrationError(
            f"{obj.__name__} is a class: register an instance, {obj.__name__}() (the program "
            "calls the methods of one object the Host owns)"
        )
    methods: dict[str, CapabilityMethod] = {}
    for name, attr in inspect.getmembers_static(type(obj)):
        function = attr.__func__ if isinstance(attr, staticmethod | classmethod) else attr
        declaration = getattr(function, _MARKER, None)
        if not isinstance(declaration, Declaration):
            continue
        if name.startswith("_"):
            raise RegistrationError(f"capability method {name!r} has a private name")
        methods[name] = _method(name, declaration, getattr(obj, name))
    if not methods:
        hint = (
            " (register a function tool with @capability on the function itself)"
            if callable(obj)
            else ""
        )
        raise RegistrationError(f"{type(obj).__qualname__} has no @capability methods{hint}")
    for method in methods.values():
        _check_laws(method, methods)
    return methods


def is_function_tool(obj: object) -> bool:
    """Whether ``host.register(name, obj)`` means a top-level function tool: a function or
    bound method (not an object whose methods are the tools)."""
    return inspect.isroutine(obj) or isinstance(obj, functools.partial)


def capability_function(name: str, fn: Callable[..., object]) -> CapabilityMethod:
    """The function tool ``name`` (a method of the ``FUNCTIONS`` capability) for ``fn``.

    Raises ``RegistrationError`` when ``fn`` was not declared with ``@capability``, for
    the checks of ``capability_methods``, and when it declares a batch or projection law
    (those relate methods of one capability object; the passes rewrite ``cap.m(...)``).
    """
    declaration = getattr(fn, _MARKER, None)
    if not isinstance(declaration, Declaration):
        raise RegistrationError(
            f"function {name!r} has no @capability declaration; decorate it, e.g. "
            "@capability(effect=Effect.PURE, version='1') (bare @capability: effect unknown)"
        )
    if declaration.batch is not None or declaration.projection is not None:
        raise RegistrationError(
            f"function tool {name!r}: batch and projection laws are for capability objects"
        )
    return _method(name, declaration, fn)


def _method(name: str, declaration: Declaration, bound: Callable[..., object]) -> CapabilityMethod:
    """One capability method, callable as ``bound``, checked as the broker needs it."""
    try:
        signature = inspect.signature(bound)
    except (TypeError, ValueError) as exc:
        raise RegistrationError(f"{name!r}: no signature to bind calls against ({exc})") from None
    for param in signature.parameters.values():
        if param.default is inspect.Parameter.empty:
            continue
        try:
            check_plain(param.default)
        except NotPlain as exc:
            raise RegistrationError(
                f"default of {name}({param.name}=...) is not plain data: {exc}"
            ) from None
    scoped = signature.parameters.get(declaration.scope) if declaration.scope else None
    if declaration.scope is not None and (
        scoped is None
        or scoped.kind
        not in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    ):
        raise RegistrationError(
            f"scope of {name!r}: no parameter {declaration.scope!r} that can be passed by name"
        )
    return CapabilityMethod(
        name=name,
        effect=declaration.effect,
        version=declaration.version,
        cost=declaration.cost,
        signature=signature,
        is_async=inspect.iscoroutinefunction(bound),
        batch=declaration.batch,
        projection=declaration.projection,
        scope=declaration.scope,
    )


class FunctionTools:
    """The target of the ``FUNCTIONS`` capability: its functions as attributes, so the
    broker calls ``getattr(target, name)(...)`` as for any capability object."""

    __slots__ = ("_functions",)

    def __init__(self, functions: Mapping[str, Callable[..., object]]) -> None:
        self._functions = dict(functions)

    def __getattr__(self, name: str) -> Callable[..., object]:
        try:
            return self._functions[name]
        except KeyError:
            raise AttributeError(name) from None

    def with_function(self, name: str, fn: Callable[..., object]) -> FunctionTools:
        """A copy with ``fn`` added (a registration never changes a running scope's target)."""
        return FunctionTools({**self._functions, name: fn})


def _check_laws(method: CapabilityMethod, methods: Mapping[str, CapabilityMethod]) -> None:
    """A law may only relate read-only methods of one object (no law adds authority)."""
    for law, role in ((method.batch, "batch"), (method.projection, "projection")):
        if law is None:
            continue
        target = methods.get(law.method)
        if not method.effect.speculable or target is None or not target.effect.speculable:
            raise RegistrationError(
                f"{role} law of {method.name!r}: both it and {law.method!r} must be pure or "
                "immutable_read capability methods of the same object"
            )
        if isinstance(law, BatchLaw) and law.param not in method.signature.parameters:
            raise RegistrationError(f"batch law of {method.name!r}: no parameter {law.param!r}")
        if isinstance(law, ProjectionLaw) and (
            law.projection != "splitlines_head" or law.limit not in target.signature.parameters
        ):
            raise RegistrationError(
                f"projection law of {method.name!r}: unknown projection {law.projection!r} "
                f"or {law.method!r} has no parameter {law.limit!r}"
            )


@dataclass(frozen=True, slots=True)
class EffectProposal:
    """An effect suggested by a tool's MCP annotations; not usable until confirmed.

    ``capability(effect=proposal)`` raises: the Host must look at the tool and call
    ``confirm()`` (or choose another effect). ``reason`` says which hints led here.
    """

    effect: Effect
    reason: str

    def confirm(self) -> Effect:
        """The Host's decision to trust the proposal."""
        return self.effect


_HINTS = {
    "readOnlyHint": "read_only_hint",
    "destructiveHint": "destructive_hint",
    "idempotentHint": "idempotent_hint",
    "openWorldHint": "open_world_hint",
}
"""MCP annotation names (camelCase, as on the wire) and their snake_case attribute names
(the official SDK's ``ToolAnnotations`` fields)."""


def _hints(annotations: object) -> dict[str, object]:
    """The hints present in ``annotations``, by their camelCase name.

    Accepts a mapping with camelCase or snake_case keys, or an object with the SDK's
    snake_case attributes (``mcp.types.ToolAnnotations``); a hint that is absent or None
    is left out (its MCP default applies).
    """
    found: dict[str, object] = {}
    for camel, snake in _HINTS.items():
        if isinstance(annotations, Mapping):
            value = annotations.get(camel, annotations.get(snake))
        else:
            value = getattr(annotations, snake, getattr(annotations, camel, None))
        if value is not None:
            found[camel] = value
    return found


def propose_effect(annotations: Mapping[str, object] | object | None) -> EffectProposal:
    """Map MCP tool annotations to a proposed effect.

    ``annotations`` is a mapping (camelCase keys as on the wire, or snake_case), the
    official SDK's ``ToolAnnotations`` object, or None. MCP defaults apply to missing
    hints (``readOnlyHint`` false, ``openWorldHint`` true). A read-only tool of a closed
    world is proposed as ``immutable_read`` (the Host must know that what it reads is
    frozen for the run); a read-only tool of an open world as ``live_read``; anything that
    is not read-only as ``write`` whatever its other hints (idempotent or not, a call that
    changes state is never run early or replayed). No hints at all propose ``unknown``.
    """
    hints = _hints(annotations) if annotations is not None else {}
    if not hints:
        return EffectProposal(Effect.UNKNOWN, "no annotations")
    read_only = hints.get("readOnlyHint", False) is True
    open_world = hints.get("openWorldHint", True) is not False
    if not read_only:
        destructive = hints.get("destructiveHint", True) is not False
        kind = "destructive" if destructive else "additive"
        return EffectProposal(Effect.WRITE, f"not read-only ({kind})")
    if open_world:
        return EffectProposal(Effect.LIVE_READ, "read-only, open world")
    return EffectProposal(Effect.IMMUTABLE_READ, "read-only, closed world")
