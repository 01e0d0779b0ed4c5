"""Control-flow records and AST helpers of discovery, and its bounds.

Discovery follows a program's control flow without running it. These are the records it
keeps while doing so - which choices are still open (``_Branch``), which loop or function
body may already have been left (``_Exit``), where a statement runs (``_Context``) - and
the small pure helpers over AST nodes and values it needs. Nothing here holds state across
statements.
"""

from __future__ import annotations

import ast
import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from .._exceptions import NotKnown
from ..evaluator import UNKNOWN, truth, walk
from ._bindings import Binding, Scope
from ._model import ControlFrame, ControlKind, Occurrence, OccurrenceId, PathItem
from ._scopes import Written

MAX_ITERATIONS = 256
"""Most iterations one loop or comprehension is expanded into; longer ones are not expanded."""

MAX_CALL_DEPTH = 4
"""Deepest nesting of program-defined function calls that is expanded."""

MAX_EXPANSIONS = 4096
"""Most expansion work in one run: loop and comprehension iterations, function bodies, and
occurrences discovered inside them, all together. Past it nothing more is expanded and
calls inside expansions are not reported (their effects on views still count)."""

MAX_EXPANSION_SECONDS = 1.0
"""Most wall time one run may spend inside expansions: a safety valve against a program
whose every iteration is expensive to evaluate (each evaluation is bounded, but thousands
of them are not). Unlike the other bounds it is not deterministic; real programs stay far
below it, and running out of it only stops expanding."""

OPAQUE_BUILTINS = frozenset(
    {
        "eval",
        "exec",
        "compile",
        "globals",
        "locals",
        "vars",
        "getattr",
        "setattr",
        "delattr",
        "__import__",
        "breakpoint",
        "input",
        "open",
        "super",
        "type",
        "object",
    }
)
"""Builtins that can reach or run arbitrary code (including the capabilities by name)."""

REFLECTIVE_MODULES = frozenset(
    {
        "__main__",
        "builtins",
        "sys",
        "gc",
        "inspect",
        "importlib",
        "types",
        "ctypes",
        "code",
        "codeop",
        "pdb",
        "bdb",
        "runpy",
        "pickle",
        "copyreg",
        "shelve",
    }
)
"""Modules whose functions can reach the program's globals or frames, or run code named by
data: their calls are treated as unknown code (as are those of relative imports, the
program's own modules). Every other import is library code that can only mutate what it
is handed: even ``os`` or ``subprocess`` act on the Guest's sandbox, never on what a
capability read sees. (Program functions handed to library code are caught as escapes.)"""

NON_MUTATING_METHODS = frozenset(
    name for t in (str, bytes, tuple, int, float) for name in dir(t) if not name.startswith("_")
) | frozenset({"copy", "count", "index", "get", "keys", "values", "items", "fromkeys"})
"""Method names that do not change a plain receiver (every ``str``/``bytes``/``tuple``
method, and the read-only ``list``/``dict`` ones). None of them is also the name of a
mutating ``list``/``dict``/``set`` method."""


class DiscoverySink(Protocol):
    """Where discovery reports; the event graph implements it.

    Calls arrive in program order for ``discovered``; arguments and control changes may
    arrive later, from ``result_known``/``result_unknown``.
    """

    def discovered(self, occurrence: Occurrence) -> None: ...

    def arguments_known(
        self, occurrence_id: OccurrenceId, args: tuple[object, ...], kwargs: dict[str, object]
    ) -> None: ...

    def arguments_unknown(self, occurrence_id: OccurrenceId) -> None: ...

    def control_changed(
        self, occurrence_id: OccurrenceId, discardable: bool, dead: bool
    ) -> None: ...


class _Decision(enum.Enum):
    UNDECIDED = "undecided"
    LIVE = "live"
    DEAD = "dead"


@dataclass(slots=True, eq=False)
class _Branch:
    """One side of a choice discovery cannot make yet (maybe never)."""

    producers: frozenset[OccurrenceId]  # results that decide it (empty: never decided)
    decision: _Decision = _Decision.UNDECIDED
    members: list[OccurrenceId] = field(default_factory=list)  # occurrences under it


@dataclass(slots=True)
class _Context:
    """Where a statement runs: its scope and the state of its timeline."""

    scope: Scope
    globals: Scope  # the module scope as this code sees it (differs inside functions)
    written: Written  # what may have been written so far (shared along one timeline)
    path: tuple[PathItem, ...]
    control: tuple[ControlFrame, ...]  # lexical: recorded in sites
    branches: tuple[_Branch, ...]  # dynamic: decides discardable/dead
    emit: bool  # False: only collect effects (bodies that are not expanded)
    depth: int = 0  # program-defined function calls being expanded
    loop: _Exit | None = None  # the innermost loop being expanded
    function: _Exit | None = None  # the function being expanded


@dataclass(slots=True, eq=False)
class _Exit:
    """A loop or function body being expanded, and whether it may already have been left
    (``break``/``continue``/``return`` under an unresolved branch): everything discovered
    after that point is under ``branch``, which is never decided."""

    base: tuple[_Branch, ...]  # the branches in force where the body starts
    branch: _Branch = field(default_factory=lambda: _Branch(frozenset()))
    maybe: bool = False


class _Leave(Exception):
    """A ``break``/``continue``/``return`` that certainly runs, unwinding discovery."""

    def __init__(self, kind: type[ast.stmt], value: Binding = None) -> None:
        self.kind = kind
        self.value = value


class _Waiter:
    __slots__ = ("pending", "run")

    def __init__(self, pending: int, run: Callable[[], None]) -> None:
        self.pending = pending
        self.run = run


def _frame(kind: ControlKind, node: ast.AST, part: str = "body") -> ControlFrame:
    return ControlFrame(kind, getattr(node, "lineno", 0), getattr(node, "col_offset", 0), part)


def _assigned_names(target: ast.AST) -> Iterable[str]:
    for node in walk(target):
        if isinstance(node, ast.Name):
            yield node.id


def _substitute(node: ast.AST, subst: Mapping[int, str]) -> ast.AST:
    """A copy of ``node`` with the subexpressions in ``subst`` replaced by names.

    Shares every subtree that contains no replacement (AST nodes are never mutated).
    """
    name = subst.get(id(node))
    if name is not None:
        return ast.Name(id=name, ctx=ast.Load())
    changed = False
    fields: dict[str, object] = {}
    for field_name, value in ast.iter_fields(node):
        if isinstance(value, ast.AST):
            new: object = _substitute(value, subst)
            changed |= new is not value
        elif isinstance(value, list):
            new = [_substitute(v, subst) if isinstance(v, ast.AST) else v for v in value]
            changed |= any(a is not b for a, b in zip(new, value, strict=True))
        else:
            new = value
        fields[field_name] = new
    if not changed:
        return node
    copy = type(node)(**fields)
    return ast.copy_location(copy, node)


def _listed(iterable: ast.expr) -> ast.expr:
    """``list(iterable)``: what a ``for`` iterates, as a value the evaluator may return
    (it refuses iterators such as ``enumerate(...)`` themselves, and unordered sets)."""
    call = ast.Call(ast.Name("list", ast.Load()), [iterable], [])
    return ast.copy_location(call, iterable)


def _bounded_items(value: object) -> list[object] | None:
    """The items a ``for`` over ``value`` yields, if that is exactly knowable and short."""
    t = type(value)
    if t in (list, tuple, str, bytes, dict, range):
        if len(value) > MAX_ITERATIONS:  # type: ignore[arg-type]
            return None
        return list(value)  # type: ignore[call-overload]
    return None  # sets (hash order), iterators, unknown values


def _truth(value: object) -> bool | None:
    if value is UNKNOWN:
        return None
    try:
        return truth(value)
    except NotKnown:
        return None
