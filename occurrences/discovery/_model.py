"""The data model of discovery: sites, occurrence identities and what the Host declared.

These values are built for every call site of every accepted statement, on the path from
a streamed chunk to a ready occurrence (target: well under a millisecond). They are
therefore frozen slots dataclasses, not pydantic models as the first design sketched:
pydantic construction costs microseconds per value and buys nothing here, because nothing
in this module crosses a trust boundary (the house style: hot per-chunk paths avoid pydantic).

Identity follows docs/glossary.md: a *site* is a source position (plus the capability method it
targets and its lexical control context); an *occurrence* is one arrival at a site, told
apart from other arrivals by its path of iteration indices (and, for calls inside an
expanded function body, the position of the call that expanded it).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from ._effect import Effect

FUNCTIONS = ""
"""The capability the Host's top-level function tools belong to (``host.register("search",
fn)``). It is not an identifier, so the program can never name it: each of its methods is
a global function of the program instead (``search(...)``), bound in discovery's module
scope like an alias ``search = <capability>.search``. All function tools are one
capability and so one unit of state: a call of one that may write puts every one of them
on a new view (they may share a backend, like the tools of one MCP server)."""


def tool_name(capability: str, method: str) -> str:
    """How a tool is named to people (traces, timelines, messages): ``docs.search``, or
    ``search`` for a function tool."""
    return method if capability == FUNCTIONS else f"{capability}.{method}"


@dataclass(frozen=True, slots=True)
class MethodSpec:
    """What the Host declares about one capability method (the only source of effects).

    ``scope`` (optional) names the parameter whose value is the only part of the
    capability's state the method reads or writes (see ``_scopes``); ``scope_position`` is
    that parameter's index among the positional parameters, so a positional argument is
    found too (None: it can only be passed by keyword).
    """

    effect: Effect
    version: str
    scope: str | None = None
    scope_position: int | None = None


class ControlKind(enum.StrEnum):
    """The kinds of structure that can enclose a call site."""

    IF = "if"
    FOR = "for"
    WHILE = "while"
    TRY = "try"
    WITH = "with"
    FUNCTION = "function"
    COMPREHENSION = "comprehension"
    CONDITIONAL = "conditional"  # the short-circuited part of ``and``/``or``/``x if c else y``


@dataclass(frozen=True, slots=True)
class ControlFrame:
    """One enclosing structure: its kind, the position of its node, and which part of it
    (``body``, ``orelse``, ``handler``, ``finally``, ``element`` ...) holds the site."""

    kind: ControlKind
    lineno: int
    col_offset: int
    part: str = "body"


@dataclass(frozen=True, slots=True)
class Site:
    """A static occurrence: a call of ``capability.method`` at one source position.

    ``control`` lists the enclosing structures, outermost first; empty at top level.
    """

    capability: str
    method: str
    lineno: int
    col_offset: int
    end_lineno: int
    end_col_offset: int
    control: tuple[ControlFrame, ...] = ()

    @property
    def position(self) -> tuple[int, int, int, int]:
        return (self.lineno, self.col_offset, self.end_lineno, self.end_col_offset)


PathItem = int | tuple[int, int]
"""An iteration index, or the (lineno, col_offset) of the call that expanded a function."""


@dataclass(frozen=True, slots=True)
class OccurrenceId:
    """(site, path): ``path`` is empty for a plain top-level call.

    Its hash is computed once: discovery and the graph key dicts and sets by it on every
    update, and hashing it anew walks the site and its control frames (a frame's kind is an
    enum, whose hash is Python code). Copies and unpickled ones compute it again
    (``__reduce__``): string hashes differ between processes.
    """

    site: Site
    path: tuple[PathItem, ...] = ()
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.site, self.path)))

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple[type[OccurrenceId], tuple[Site, tuple[PathItem, ...]]]:
        return (OccurrenceId, (self.site, self.path))

    def __str__(self) -> str:
        s = self.site
        where = f"{tool_name(s.capability, s.method)}@{s.lineno}:{s.col_offset}"
        return where + ("" if not self.path else "[" + ",".join(map(str, self.path)) + "]")


@dataclass(frozen=True, slots=True)
class Occurrence:
    """One discovered arrival at a site, as discovery reports it to its sink.

    ``data_deps`` are the occurrences whose results its arguments read (even ones already
    completed, so the graph's shape does not depend on timing); ``control_deps`` those whose
    results decide an enclosing branch. ``pre_write`` is False when a call that may write
    what it reads (effect ``write`` or ``unknown``, or unknown code; with declared scopes,
    only a write whose scope may overlap its own) precedes it in program order. When that
    depends on a scope argument computed from results, ``pre_write`` is True and decided
    once they arrive: if the scope overlaps, its arguments are reported unknown (so it never
    runs early). ``order`` is its rank in program order (discovery order of one run).
    """

    id: OccurrenceId
    effect: Effect
    pre_write: bool
    data_deps: frozenset[OccurrenceId]
    control_deps: frozenset[OccurrenceId]
    discardable: bool
    dead: bool
    order: int

    @property
    def site(self) -> Site:
        return self.id.site
