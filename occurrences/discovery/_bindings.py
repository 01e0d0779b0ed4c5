"""What discovery knows about each name: bindings and scopes.

Prior art: pyflakes' ``Binding`` classes and LibCST's scope provider keep bindings and
scopes as explicit objects beside the AST instead of annotating it. Here a binding says
what a name holds *as far as the Host can tell exactly*:

- ``Known``: a plain value computed exactly by the evaluator;
- ``Result``: the (future) result of an earlier occurrence - a data edge;
- ``Derived``: an expression over results not all known yet, evaluated once they are;
- ``CapabilityRef`` / ``MethodRef``: a trusted capability object or one of its methods
  (so aliases like ``ws = workspace`` and ``read = workspace.read_text`` work);
- ``FunctionRef``: a function defined by the program (expanded when called with known
  arguments);
- ``ModuleRef``: an imported library module or name (its calls are not program code);
- ``Mutated``: a data value no longer known exactly (something it may share structure
  with was changed in place), whose origins are still tracked so that mutating it later
  forgets only what may share structure with it;
- ``UNKNOWN`` (the evaluator's marker): bound, but nothing exact is known.

Bindings are immutable; scopes map names to them. A name absent from every scope is a
builtin (or a NameError), which the evaluator handles.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from .._exceptions import NotKnown
from ..evaluator import UNKNOWN, Limits, evaluate, walk
from ._model import OccurrenceId

Origins = frozenset[object] | None
"""Which objects a value may share structure with, as abstract origin tags (a tool result,
a fresh display...); ``None``: it may share structure with anything. A mutation through a
value invalidates exactly the bindings whose origins meet its origins."""


@dataclass(frozen=True, slots=True)
class Known:
    value: object
    origins: Origins = None  # meaningful only for mutable values


@dataclass(frozen=True, slots=True)
class Result:
    producer: OccurrenceId


@dataclass(frozen=True, slots=True)
class CapabilityRef:
    capability: str


@dataclass(frozen=True, slots=True)
class MethodRef:
    capability: str
    method: str


@dataclass(frozen=True, slots=True)
class ModuleRef:
    """An imported module (or a name imported from one). A library one's functions may
    mutate the arguments they receive but cannot reach the capabilities; a reflective one
    (``sys``, ``inspect``, ``os`` ...) is treated as unknown code."""

    name: str
    reflective: bool = False


@dataclass(frozen=True, slots=True, eq=False)
class FunctionRef:
    node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
    defaults: tuple[object, ...]  # Known values of positional defaults, or None if unknown
    expandable: bool  # plain positional/keyword parameters, no decorators, known defaults


@dataclass(slots=True, eq=False)
class Derived:
    """``expr`` over ``captured`` bindings; ``producers`` are all results it may read."""

    expr: ast.expr
    captured: dict[str, Binding]
    producers: frozenset[OccurrenceId]
    origins: Origins
    value: object = field(default=None)  # memo, valid once ``done``
    done: bool = False


@dataclass(frozen=True, slots=True)
class Mutated:
    """A plain data value whose contents are unknown but which may share structure only
    with ``origins`` (never a capability, module or function)."""

    origins: frozenset[object]


@dataclass(frozen=True, slots=True)
class Unpacked:
    """Item ``index`` of unpacking ``source`` into exactly ``count`` targets."""

    source: Binding
    index: int
    count: int


Binding = (
    Known
    | Result
    | Derived
    | Unpacked
    | Mutated
    | CapabilityRef
    | MethodRef
    | ModuleRef
    | FunctionRef
    | object
)
"""One of the classes above, or ``UNKNOWN``."""

_IMMUTABLE_SCALARS = (type(None), bool, int, float, complex, str, bytes)


def is_immutable(value: object) -> bool:
    """True when no statement of the program can mutate ``value`` in place."""
    t = type(value)
    if t in _IMMUTABLE_SCALARS:
        return True
    if t is tuple or t is frozenset:
        assert isinstance(value, tuple | frozenset)
        return all(is_immutable(v) for v in value)
    return False


def may_be_mutable(binding: Binding) -> bool:
    """True when the value behind ``binding`` might be a list, dict or other mutable."""
    if isinstance(binding, Known):
        return not is_immutable(binding.value)
    return isinstance(binding, Result | Derived | Unpacked | Mutated)


def origins_of(binding: Binding) -> Origins:
    """The origins of the value behind ``binding`` (empty when it cannot be mutated)."""
    if isinstance(binding, Known):
        return frozenset() if is_immutable(binding.value) else binding.origins
    if isinstance(binding, Result):
        return frozenset((binding.producer,))  # every claim gets a fresh copy
    if isinstance(binding, Derived | Mutated):
        return binding.origins
    if isinstance(binding, Unpacked):
        return origins_of(binding.source)
    if isinstance(binding, CapabilityRef | MethodRef | ModuleRef | FunctionRef):
        return frozenset()
    return None


def data_origins(binding: Binding) -> Origins:
    """The origins of a plain data value; ``None`` (anything) for ``UNKNOWN`` and for a
    capability, module or function, which must never be taken for data."""
    if isinstance(binding, CapabilityRef | MethodRef | ModuleRef | FunctionRef):
        return None
    return origins_of(binding)


def union_origins(origins: Iterable[Origins]) -> Origins:
    out: set[object] = set()
    for o in origins:
        if o is None:
            return None
        out |= o
    return frozenset(out)


def producers_of(binding: Binding) -> frozenset[OccurrenceId]:
    """Every occurrence whose result the value of ``binding`` may depend on."""
    if isinstance(binding, Result):
        return frozenset((binding.producer,))
    if isinstance(binding, Derived):
        return binding.producers
    if isinstance(binding, Unpacked):
        return producers_of(binding.source)
    return frozenset()


Results = Mapping[OccurrenceId, object]
"""Completed results by producer; ``UNKNOWN`` for one that failed or will never run."""


def resolve(binding: Binding, results: Results) -> object:
    """The value of ``binding`` for the evaluator: a value, or ``UNKNOWN``.

    Call only once every producer of ``binding`` is in ``results``; a missing one reads
    as ``UNKNOWN``.
    """
    if isinstance(binding, Known):
        return binding.value
    if isinstance(binding, Result):
        return results.get(binding.producer, UNKNOWN)
    if isinstance(binding, Derived):
        if not binding.done:
            binding.value = evaluate_in(binding.expr, binding.captured, results)
            binding.done = True
        return binding.value
    if isinstance(binding, Unpacked):
        source = resolve(binding.source, results)
        if source is UNKNOWN or type(source) not in (tuple, list, str, bytes, dict):
            return UNKNOWN
        assert isinstance(source, tuple | list | str | bytes | dict)
        items = tuple(source)
        return items[binding.index] if len(items) == binding.count else UNKNOWN
    return UNKNOWN


EVALUATION_LIMITS = Limits(max_steps=5_000)
"""The evaluator's bounds for discovery: at most 5,000 steps per expression (the
evaluator's own default allows 200,000). Discovery runs on the Host's event loop while the
model streams (``pysolate._run._stream_run``), one statement per step, so one evaluation is what
holds the loop longest: measured at 0.4-0.8 us per step on ordinary arguments
(comprehensions, joins, ``map`` with a ``lambda``), 5,000 steps are 2-4 ms at most, where
200,000 were up to 0.2 s. An argument past it is not known: that call is simply not
started early, the Guest makes it (a thousand-item comprehension is about 7,000 steps)."""


def evaluator_env(captured: Mapping[str, Binding], results: Results) -> dict[str, object]:
    return {name: resolve(b, results) for name, b in captured.items()}


def evaluate_in(expr: ast.expr, captured: Mapping[str, Binding], results: Results) -> object:
    """``evaluate`` with bindings resolved; ``UNKNOWN`` instead of ``NotKnown``."""
    try:
        return evaluate(expr, evaluator_env(captured, results), limits=EVALUATION_LIMITS)
    except (NotKnown, RecursionError):
        return UNKNOWN


class Scope:
    """Names of one frame, over an optional parent scope they fall back to.

    Three uses: the module scope (no parent); an *overlay* over another scope, for code
    whose effects must be merged back conservatively (branches under an unresolved
    condition, loop iterations, comprehensions); and a function's local scope, whose
    parent is the module scope.
    """

    __slots__ = ("aliased", "assigned", "local", "mutable", "parent", "seen")

    def __init__(
        self, parent: Scope | None = None, local: dict[str, Binding] | None = None
    ) -> None:
        self.parent = parent
        self.local: dict[str, Binding] = {} if local is None else local
        # The names in ``local`` whose binding may be mutable (``may_be_mutable``): a mutation
        # visits only these (``mutable_visible``). Most names hold a capability, a function,
        # a scalar or nothing known, and scanning them all made every mutating statement
        # cost in proportion to the program so far. Kept by ``bind``, the only writer.
        self.mutable: dict[str, None] = {
            name: None for name, b in self.local.items() if may_be_mutable(b)
        }
        # Names bound in this scope since it was created (what a merge must forget).
        self.assigned: set[str] = set()
        # Per assigned name, the origins of every binding it had here (None: anything);
        # a merge may keep them (see ``_Effects._merge``).
        self.seen: dict[str, Origins] = {}
        # Capabilities some name here was bound to, even if bound to something else since.
        self.aliased: set[str] = set()

    def lookup(self, name: str) -> Binding | None:
        scope: Scope | None = self
        while scope is not None:
            found = scope.local.get(name)
            if found is not None:
                return found
            scope = scope.parent
        return None

    def bind(self, name: str, binding: Binding) -> None:
        self.local[name] = binding
        if may_be_mutable(binding):
            self.mutable[name] = None
        else:
            self.mutable.pop(name, None)
        self.assigned.add(name)
        self.seen[name] = union_origins((self.seen.get(name, frozenset()), data_origins(binding)))
        if isinstance(binding, CapabilityRef | MethodRef):
            self.aliased.add(binding.capability)

    def visible(self) -> Iterator[tuple[str, Binding]]:
        """Every visible name with its binding (inner scopes shadow outer ones)."""
        seen: set[str] = set()
        scope: Scope | None = self
        while scope is not None:
            for name, b in scope.local.items():
                if name not in seen:
                    seen.add(name)
                    yield name, b
            scope = scope.parent

    def mutable_visible(self) -> list[tuple[str, Binding]]:
        """What ``visible()`` yields whose binding may be mutable, found through ``mutable``
        instead of by testing every name (a list: the caller rebinds while it goes)."""
        found: list[tuple[str, Binding]] = []
        inner: list[dict[str, Binding]] = []  # the scopes that shadow the current one
        scope: Scope | None = self
        while scope is not None:
            for name in scope.mutable:
                if not any(name in local for local in inner):
                    found.append((name, scope.local[name]))
            inner.append(scope.local)
            scope = scope.parent
        return found

    def snapshot(self, node: ast.AST) -> Scope:
        """A detached copy of what ``node`` may read, for work deferred until results arrive:
        the names it mentions, or everything visible if it calls a program function (whose
        body reads globals of its own)."""
        names = {n.id for n in walk(node) if isinstance(n, ast.Name)}
        found = {name: b for name in names if (b := self.lookup(name)) is not None}
        if any(isinstance(b, FunctionRef) for b in found.values()):
            return Scope(None, dict(self.visible()))
        return Scope(None, found)
